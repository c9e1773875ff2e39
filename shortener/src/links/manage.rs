//! Link management: lists with cursors, edits with their history, exports.

use super::LinkExport;
use super::LinkService;
use crate::domain::{
    Caller, Error, Event, EventKind, History, Link, LinkPatch, ListInput, ListQuery,
    MAX_HISTORY_EVENTS, Page, PasswordChange, ShortCode,
};
use crate::store::{LinkStore, UpdateOutcome};
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};

/// A page of a list and the cursor of the next one.
#[derive(Debug, Clone)]
pub struct ListPage {
    /// The links, newest first.
    pub links: Vec<Link>,
    /// The cursor of the next page, if there may be one.
    pub next_cursor: Option<String>,
}

impl LinkService {
    /// The checked query `input` asks for on behalf of `caller` (confined to its tenant unless
    /// it is `admin`), its cursor opened.
    pub fn list_query(&self, caller: &Caller, input: &ListInput) -> Result<ListQuery, Error> {
        let mut query = ListQuery::parse(input, caller.tenant_scope(), Utc::now())?;
        if let Some(cursor) = &input.cursor {
            query.after = Some(self.cursors.open(&query, cursor)?);
        }
        Ok(query)
    }

    /// One page of the caller's links, newest first, and the cursor that continues it.
    pub async fn list(&self, caller: &Caller, input: &ListInput) -> Result<ListPage, Error> {
        let query = self.list_query(caller, input)?;
        let Page { links, next } = self.store.list(&query).await?;
        Ok(ListPage {
            next_cursor: next.map(|position| self.cursors.seal(&query, &position)),
            links,
        })
    }

    /// Every link of the caller's list (filters as in [`LinkService::list`], cursor and limit
    /// aside), newest first, streamed a page at a time (see [`super::export`] for what a
    /// reader sees and holds). `RateLimited` when the node or the caller's key already runs as
    /// many exports as allowed.
    pub fn export(&self, caller: &Caller, input: &ListInput) -> Result<LinkExport, Error> {
        let input = ListInput {
            cursor: None,
            limit: None,
            ..input.clone()
        };
        let query = self.list_query(caller, &input)?;
        self.exports.start(self.store.clone(), caller, query)
    }

    /// Applies a checked patch to a link of the caller's tenant (any tenant's for `admin`) and
    /// returns the link as it is now. The change and its history events commit together; every
    /// node stops serving the old version (this one at once, the others when the change feed
    /// tells them). A deleted link is [`Error::Gone`]: deletes are permanent.
    pub async fn update(
        &self,
        caller: &Caller,
        code: &ShortCode,
        patch: &LinkPatch,
    ) -> Result<Link, Error> {
        let new_password = match &patch.password {
            Some(PasswordChange::Set(password)) => Some(password),
            _ => None,
        };
        // A code found under the same key on every domain: only the named domain's. And a new
        // password costs a hash only for a link that is the caller's and not deleted.
        if new_password.is_some() || code.scoped() {
            let link = self.get(caller, code).await?;
            if new_password.is_some() && link.deleted_at.is_some() {
                return Err(Error::Gone(code.shown().to_string()));
            }
        }
        if let Some(domain) = &patch.domain {
            self.check_move(caller, code, domain.as_deref()).await?;
        }
        // A new password is hashed last, before the store sees the patch.
        let hashed;
        let patch = match new_password {
            Some(password) => {
                hashed = LinkPatch {
                    password: Some(PasswordChange::Hashed(self.hash(password.clone()).await?)),
                    ..patch.clone()
                };
                &hashed
            }
            None => patch,
        };
        let outcome = self
            .store
            .update(
                code.as_str(),
                caller.tenant_scope(),
                patch,
                &caller.author(),
            )
            .await?;
        match outcome {
            UpdateOutcome::Updated(link) => {
                self.changes.changed(code.as_str());
                let action = super::audit::patch_action(patch);
                let change = super::audit::patch_summary(patch);
                self.audit_link(caller, &link.tenant, &link.code, action, change)
                    .await;
                // The read after the write carries the click counts.
                Ok(self
                    .store
                    .get_with_clicks(code.as_str())
                    .await?
                    .unwrap_or(*link))
            }
            UpdateOutcome::NotFound => Err(Error::NotFound(code.shown().to_string())),
            UpdateOutcome::Gone => Err(Error::Gone(code.shown().to_string())),
        }
    }

    /// The events of a link of the caller's tenant, oldest first: its creation (from the link
    /// row, with the values it was made with), then each recorded change; for a link changed
    /// more than [`MAX_HISTORY_EVENTS`] times, the latest changes only (no creation event:
    /// the values it was made with are found by undoing every change), and `true`. Another
    /// tenant's link is not found, and its events are never read.
    pub async fn history(
        &self,
        caller: &Caller,
        code: &ShortCode,
    ) -> Result<(Vec<Event>, bool), Error> {
        let History {
            link,
            events,
            earlier,
        } = self
            .store
            .history(code.as_str(), caller.tenant_scope(), MAX_HISTORY_EVENTS)
            .await?
            .filter(|history| caller.sees(&history.link.tenant) && code.names(&history.link))
            .ok_or_else(|| Error::NotFound(code.shown().to_string()))?;
        if earlier {
            return Ok((events, true));
        }
        let mut all = Vec::with_capacity(events.len() + 1);
        all.push(creation(&link, &events));
        all.extend(events);
        Ok((all, false))
    }
}

fn time(t: Option<DateTime<Utc>>) -> Value {
    t.map_or(Value::Null, |t| {
        Value::String(t.to_rfc3339_opts(SecondsFormat::Millis, true))
    })
}

/// The creation event of `link`: the values it was made with, found by undoing `events` (each
/// records the old value of what it changed) from the link as it is now.
fn creation(link: &Link, events: &[Event]) -> Event {
    let mut made: Map<String, Value> = Map::new();
    made.insert("url".into(), Value::String(link.url.clone()));
    made.insert("expires_at".into(), time(link.expires_at));
    made.insert("tags".into(), json!(link.tags));
    made.insert("max_visits".into(), json!(link.max_visits));
    made.insert(
        "password".into(),
        if link.password.is_some() {
            json!("(set)")
        } else {
            Value::Null
        },
    );
    for event in events.iter().rev() {
        if let Value::Object(fields) = &event.change {
            for (field, change) in fields {
                if let (Some(slot), Some(old)) = (made.get_mut(field), change.get("old")) {
                    *slot = old.clone();
                }
            }
        }
    }
    let change = made
        .into_iter()
        .filter(|(_, value)| !value.is_null())
        .filter(|(field, value)| field != "tags" || value.as_array().is_some_and(|t| !t.is_empty()))
        .map(|(field, value)| (field, json!({ "old": null, "new": value })))
        .collect::<Map<_, _>>();
    let mut change = Value::Object(change);
    if link.import_batch.is_some() {
        change["imported"] = json!({ "old": null, "new": true });
    }
    Event {
        at: link.created_at,
        key: format!("{}/{}", link.tenant, link.owner),
        kind: EventKind::Create,
        change,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ClickCounts;

    #[test]
    fn the_creation_event_undoes_every_later_change() {
        let at = Utc::now();
        let link = Link {
            code: "abc1234".into(),
            domain: None,
            routes: Default::default(),
            tenant: "acme".into(),
            owner: "ci".into(),
            url: "https://new.example/".into(),
            created_at: at,
            expires_at: None,
            deleted_at: None,
            disabled_at: None,
            max_visits: Some(5),
            tags: vec!["b".into()],
            import_batch: None,
            password: None,
            clicks: ClickCounts::default(),
        };
        let event = |change: Value| Event {
            at,
            key: "acme/ops".into(),
            kind: EventKind::Update,
            change,
        };
        let events = [
            event(
                json!({ "url": { "old": "https://first.example/", "new": "https://mid.example/" } }),
            ),
            event(
                json!({ "url": { "old": "https://mid.example/", "new": "https://new.example/" },
                          "tags": { "old": [], "new": ["b"] } }),
            ),
            event(json!({ "disabled": { "old": false, "new": true } })),
        ];
        let made = creation(&link, &events);
        assert_eq!(made.kind, EventKind::Create);
        assert_eq!(made.key, "acme/ci");
        assert_eq!(
            made.change,
            json!({ "url": { "old": null, "new": "https://first.example/" },
                    "max_visits": { "old": null, "new": 5 } })
        );
    }
}
