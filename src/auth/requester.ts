import type { GroupResource } from '../api/errors.js';
import type { KubeObject } from '../api/types.js';
import type { Authorizer } from './authorizer.js';
import type { UserInfo } from './user.js';

/** Who a request acts as and the evaluator that judged it: what access reviews answer from. */
export interface Requester {
  user: UserInfo;
  authorizer: Authorizer;
  /**
   * Checks the object a write of theirs is about to store (after defaults and validation): RBAC's escalation
   * prevention for Roles, ClusterRoles and bindings. Throws the 403 to answer.
   */
  admit?(resource: GroupResource, obj: KubeObject, old: KubeObject | undefined): void;
  /** The authenticator that identified them, for TokenReview: checks a token aimed at `audiences`. */
  reviewToken?(token: string, audiences: readonly string[]): TokenReviewResult;
}

/** A TokenReview's answer (TokenReviewStatus): who the token is, for which audiences, or why it is not. */
export interface TokenReviewResult {
  authenticated: boolean;
  user?: UserInfo;
  audiences?: string[];
  error?: string;
}
