//! Who the caller is, in Bitly's shapes: its key is the user, its tenant the one group (and
//! organization) the user belongs to. Tools ask for these first, to find the `group_guid`
//! they send with each shorten.

use super::{Failure, Outcome};
use crate::domain::Caller;
use crate::http::HttpState;
use axum::http::StatusCode;
use serde_json::{Value, json};

/// `GET /v4/user`: `login` and `name` are the key's name, `default_group_guid` its tenant.
pub(super) fn user(caller: &Caller) -> Value {
    json!({
        "login": &*caller.key,
        "name": &*caller.key,
        "is_active": true,
        "is_2fa_enabled": false,
        "is_sso_user": false,
        "emails": [],
        "default_group_guid": &*caller.tenant,
    })
}

/// The caller's tenant as a Bitly group.
fn group_of(state: &HttpState, caller: &Caller) -> Value {
    let tenant = &*caller.tenant;
    json!({
        "guid": tenant,
        "name": tenant,
        "organization_guid": tenant,
        "is_active": true,
        "bsds": [],
        "references": {
            "organization": format!("{}v4/organizations/{tenant}", state.public.as_str()),
        },
    })
}

/// `GET /v4/groups`: the one group the caller belongs to.
pub(super) fn groups(state: &HttpState, caller: &Caller) -> Value {
    json!({ "groups": [group_of(state, caller)] })
}

/// `GET /v4/groups/{guid}`: the caller's group; any other is not found (another tenant's
/// included, as a bitlink of another tenant's is).
pub(super) fn group(state: &HttpState, caller: &Caller, guid: &str) -> Outcome {
    if guid != &*caller.tenant {
        return Err(Failure {
            status: StatusCode::NOT_FOUND,
            message: "NOT_FOUND",
            field: None,
            description: format!(
                "no group {}: a key's one group is its tenant, {}",
                crate::domain::echo(guid),
                crate::domain::echo(&caller.tenant)
            ),
            retry_after: None,
            outcome: "not_found",
        });
    }
    Ok((StatusCode::OK, group_of(state, caller)))
}
