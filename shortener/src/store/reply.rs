//! Answering the callers of one batched write: each gets its own row's outcome, or the batch's
//! error. Shared by both backends' batching.

use super::{InsertOutcome, StoreError};
use tokio::sync::oneshot;

/// Where one create's outcome goes.
pub(super) type Reply = oneshot::Sender<Result<InsertOutcome, StoreError>>;

/// Sends each caller its row's outcome (in the order of `replies`), or the batch's error.
pub(super) fn answer(replies: Vec<Reply>, result: Result<Vec<InsertOutcome>, StoreError>) {
    match result {
        Ok(outcomes) => {
            for (reply, outcome) in replies.into_iter().zip(outcomes) {
                let _ = reply.send(Ok(outcome));
            }
        }
        Err(error) => {
            for reply in replies {
                let _ = reply.send(Err(error.clone()));
            }
        }
    }
}
