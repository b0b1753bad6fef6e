/**
 * The ResourceList reader/writer behind `fnr eval`: reading packages and ResourceLists, building
 * a function's input, reading its output, writing packages, stdout and results like kpt
 * 1.0.0-beta.56. Not used on the gRPC server path (the server passes bytes through untouched).
 */
export {A as ANNOTATIONS, BARE_SEQ_KEY, RESOURCE_LIST_API_VERSION, RESOURCE_LIST_KIND, type SeqIndent} from './constants.js'
export {FUNCTION_INPUT_NAME, functionConfigFromArgs, kptfileConfigMap, parseFunctionConfig, readFunctionConfig} from './function-config.js'
export {
  buildFunctionInput,
  buildFunctionInputInterruptible,
  copyComments,
  readFunctionOutput,
  readFunctionOutputInterruptible,
  type BuildInputOptions,
  type FunctionInput,
  type FunctionOutput,
} from './function-io.js'
export {IgnoreMatcher} from './krmignore.js'
export {annotationsOf, getAnnotation, krmError, metaOf, setAnnotation, deleteAnnotation, type ResourceMeta} from './meta.js'
export {emptyResourceList, parseResourceList, parseResourceListInterruptible, type ParseResourceListOptions, type ResourceList} from './read.js'
export {
  buildFunctionResultList,
  containerStderr,
  countErrorResults,
  extractResults,
  formatKptDuration,
  formatResult,
  formatResultsBlock,
  formatStderrBlock,
  stringifyFunctionResultList,
  writeResultsFile,
  type BlockOptions,
  type FunctionResult,
  type FunctionResultList,
  type FunctionRunRecord,
  type ResultResourceRef,
} from './results.js'
export {checkSinkTarget, sinkToDirectory, sourcePathsOf, writePackage, type WritePackageOptions, type WriteReport} from './sink.js'
export {checkPackageArgument, readPackage, sourcePackage, type SourceOptions} from './source.js'
export {afterPackageWrites, holdsPackageWrites} from './transaction.js'
export {
  checkPathInvariants,
  defaultPathFor,
  defaultPaths,
  defaultPathsAndIndexes,
  renderPackageFiles,
  stringifyResourceList,
  stripOrchestratorAnnotations,
  unwrapToYaml,
  wrapForStdout,
  type WrapOptions,
} from './write.js'
