import * as protoLoader from '@grpc/proto-loader'
import {expect} from 'chai'
import {spawnSync} from 'node:child_process'
import {service as healthService} from 'grpc-health-check'

import {EVALUATOR_LOAD_OPTIONS, PROTO_PATH} from '../../src/lib/grpc/proto.js'
import {REPO_ROOT} from '../support/serve.js'
import {PACKAGE_SCRIPT} from './support/package.js'

describe('wrapper-server flags', () => {
  describe('the protos embedded in the packaged executable', () => {
    let descriptors: {evaluator: Parameters<typeof protoLoader.fromJSON>[0]; health: Parameters<typeof protoLoader.fromJSON>[0]}

    before(() => {
      const r = spawnSync(
        process.execPath,
        ['--input-type=module', '-e', `import(${JSON.stringify(PACKAGE_SCRIPT)}).then((m) => process.stdout.write(JSON.stringify(m.protoDescriptors())))`],
        {cwd: REPO_ROOT, encoding: 'utf8'},
      )
      expect(r.status, r.stderr).to.equal(0)
      descriptors = JSON.parse(r.stdout)
    })

    it('encode and decode evaluator messages exactly as proto/evaluator.proto does', () => {
      const fromFile = protoLoader.loadSync(PROTO_PATH, EVALUATOR_LOAD_OPTIONS)['evaluator.FunctionEvaluator'] as protoLoader.ServiceDefinition
      const fromJson = protoLoader.fromJSON(descriptors.evaluator, EVALUATOR_LOAD_OPTIONS)['evaluator.FunctionEvaluator'] as protoLoader.ServiceDefinition
      const a = fromFile.EvaluateFunction!
      const b = fromJson.EvaluateFunction!
      expect(b.path).to.equal('/evaluator.FunctionEvaluator/EvaluateFunction')
      expect(b.path).to.equal(a.path)
      const req = {resourceList: Buffer.from('ab'), image: 'i'}
      // Field 1 bytes "ab", field 2 string "i": the wire bytes of the proto at PROTO_PATH.
      expect(b.requestSerialize(req).toString('hex')).to.equal('0a0261621201' + '69')
      expect(b.requestSerialize(req).equals(a.requestSerialize(req))).to.equal(true)
      const res = {resourceList: Buffer.from('out'), log: Buffer.from('err')}
      const bytes = a.responseSerialize(res)
      expect(b.responseSerialize(res).equals(bytes)).to.equal(true)
      expect(b.responseDeserialize(bytes)).to.deep.equal(a.responseDeserialize(bytes))
    })

    it('encode grpc.health.v1 messages exactly as grpc-health-check\'s own proto does', () => {
      const fromJson = protoLoader.fromJSON(descriptors.health, {keepCase: true, longs: String, enums: String, defaults: true, oneofs: true})['grpc.health.v1.Health'] as protoLoader.ServiceDefinition
      for (const method of ['Check', 'Watch'] as const) {
        const a = (healthService as unknown as protoLoader.ServiceDefinition)[method]!
        const b = fromJson[method]!
        expect(b.path).to.equal(a.path)
        expect(b.requestSerialize({service: 'x'}).equals(a.requestSerialize({service: 'x'}))).to.equal(true)
        const bytes = a.responseSerialize({status: 'NOT_SERVING'})
        expect(b.responseSerialize({status: 'NOT_SERVING'}).equals(bytes)).to.equal(true)
        expect(b.responseDeserialize(bytes)).to.deep.equal({status: 'NOT_SERVING'})
      }
    })
  })
})
