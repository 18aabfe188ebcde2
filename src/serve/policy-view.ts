/**
 * The retention policy as the API process sees it, read from one place: the
 * job runner's copy, which the policy store's change notifications keep
 * current (the engine thread's `policy` messages in process, Redis pub/sub
 * in cluster mode). Route class checks and response-record TTLs read it;
 * nothing asks the engine thread for it on a request's path.
 *
 * Until a store has answered (no tier, Redis down at start) it is the
 * default document (classes agent and chat).
 */
import { defaultPolicyDoc, RetentionPolicy, type RetentionPolicyDoc } from '../kvtier/index.ts';

export class PolicyView {
  private doc: RetentionPolicyDoc | null = null;
  private policy = new RetentionPolicy(defaultPolicyDoc());

  constructor(private readonly read: () => RetentionPolicyDoc | null) {}

  current(): RetentionPolicy {
    const doc = this.read();
    if (doc !== null && doc !== this.doc) {
      this.doc = doc;
      this.policy = new RetentionPolicy(doc);
    }
    return this.policy;
  }

  knownClasses(): string[] {
    return Object.keys(this.current().doc.classes);
  }
}
