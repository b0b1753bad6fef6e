/**
 * The multi evaluator: tries its evaluators in a fixed order (exec, then pod) and moves to the
 * next one only when an evaluator answers NotFound. Any other error ends the call.
 *
 * Upstream builds its evaluator list by iterating a Go map, so about half of its starts put the
 * pod runtime first and never use the exec fast path. fnr's
 * order is deterministic, and a test pins it.
 */
import {FnrError} from '../errors.js'
import type {EvaluationRequest, EvaluationResponse, Evaluator, ImageIdentity} from '../evaluator.js'

function knowsNot(evaluator: Evaluator, image: string): boolean {
  return evaluator.knows?.(image) === false
}

export class MultiEvaluator implements Evaluator {
  readonly name = 'multi'

  constructor(readonly evaluators: readonly Evaluator[]) {
    if (evaluators.length === 0) {
      throw new FnrError('Config', 'no function runtime is enabled: enable at least one of exec, pod')
    }
  }

  async evaluate(request: EvaluationRequest): Promise<EvaluationResponse> {
    let lastNotFound: FnrError | undefined
    for (const evaluator of this.evaluators) {
      if (knowsNot(evaluator, request.image)) continue
      try {
        return await evaluator.evaluate(request)
      } catch (err) {
        if (err instanceof FnrError && err.kind === 'NotFound') {
          lastNotFound = err
          continue
        }
        if (err instanceof FnrError) err.details.runtime ??= evaluator.name
        throw err
      }
    }
    throw lastNotFound ?? new FnrError('NotFound', `function ${JSON.stringify(request.image)} not found`)
  }

  /**
   * The identity declared by the evaluator that would take the call: the first one in the chain
   * that does not know the image not (an evaluator without identify() has none to give).
   */
  async identify(image: string, signal?: AbortSignal): Promise<ImageIdentity | undefined> {
    const serving = this.evaluators.find((e) => !knowsNot(e, image))
    return serving?.identify?.(image, signal)
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.evaluators.map((e) => e.close()))
  }
}
