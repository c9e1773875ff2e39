//! Renaming and deleting a tag across the caller's tenant: one change in the store (see
//! [`crate::store::LinkStore::change_tag`]), then every changed link forgotten by this node's
//! cache as a single edit's link is.

use super::LinkService;
use crate::audit::{Action, ObjectKind, Subject};
use crate::domain::{Caller, Error, TagChange, check_tag};
use crate::store::{LinkStore, TagOutcome};

/// The most links one rename or delete of a tag may change (the default, and the highest
/// setting, of `SHORTENER_TAG_CHANGE_MAX_LINKS`): the change is one transaction, and this bounds
/// how long it holds its links.
pub const MAX_TAG_CHANGE_LINKS: usize = 10_000;

impl LinkService {
    /// Renames `from` to `to` on every live link of the caller's own tenant (an `admin` key's
    /// too: a tag is a tenant's) that carries it; returns how many links changed. Refusals,
    /// each with nothing changed: `invalid_tag` for a `to` a link could not carry,
    /// [`Error::NotFound`] when no live link carries `from`, `tag_conflict` when one carries
    /// `to` already, `too_many_links` past the bound. A rename onto itself changes nothing.
    pub async fn rename_tag(&self, caller: &Caller, from: &str, to: &str) -> Result<usize, Error> {
        check_tag(to)?;
        if check_tag(from).is_err() {
            // No link can carry it.
            return Err(Error::NotFound(from.to_string()));
        }
        let change = TagChange::Rename {
            from: from.to_string(),
            to: to.to_string(),
        };
        self.change_tag(caller, &change).await
    }

    /// Removes `tags` from every live link of the caller's own tenant that carries any of them;
    /// returns how many links changed. [`Error::NotFound`] when no live link carries any (a
    /// caller that ignores unknown tags, as Shlink's delete does, reads it as nothing to do),
    /// `too_many_links` past the bound; nothing is changed by either.
    pub async fn delete_tags(&self, caller: &Caller, tags: &[String]) -> Result<usize, Error> {
        // A tag no link can carry is on no link: it is left out of the search.
        let tags: Vec<String> = tags
            .iter()
            .filter(|tag| check_tag(tag).is_ok())
            .cloned()
            .collect();
        if tags.is_empty() {
            return Err(Error::NotFound(String::new()));
        }
        self.change_tag(caller, &TagChange::Delete(tags)).await
    }

    async fn change_tag(&self, caller: &Caller, change: &TagChange) -> Result<usize, Error> {
        let outcome = self
            .store
            .change_tag(
                &caller.tenant,
                change,
                &caller.author(),
                self.tag_change_links,
            )
            .await?;
        match outcome {
            TagOutcome::Changed(codes) => {
                for code in &codes {
                    self.changes.changed(code);
                }
                self.audit_tag(caller, change, &codes).await;
                Ok(codes.len())
            }
            TagOutcome::NotFound => Err(Error::NotFound(change.sought().join(","))),
            TagOutcome::Conflict => Err(Error::conflict(
                "tag_conflict",
                match change {
                    TagChange::Rename { to, .. } => format!(
                        "the tag {to:?} is on links of this tenant already; delete it from them \
                         first, or rename onto another name"
                    ),
                    TagChange::Delete(_) => "the tags conflict".to_string(),
                },
            )),
            TagOutcome::TooMany => Err(Error::conflict(
                "too_many_links",
                format!(
                    "the tag is on more than {} links, the most one change of a tag may touch; \
                     change the links' tags in smaller steps",
                    self.tag_change_links
                ),
            )),
        }
    }

    /// Records a tag change: one entry for the tag (the links it changed, up to 100 codes, and
    /// their count); each link's own history holds its event.
    async fn audit_tag(&self, caller: &Caller, change: &TagChange, codes: &[String]) {
        let shown: Vec<&String> = codes.iter().take(100).collect();
        let (action, tag, summary) = match change {
            TagChange::Rename { from, to } => (
                Action::TagRename,
                from.clone(),
                serde_json::json!({ "from": from, "to": to, "links": codes.len(), "codes": shown }),
            ),
            TagChange::Delete(tags) => (
                Action::TagDelete,
                tags.join(","),
                serde_json::json!({ "tags": tags, "links": codes.len(), "codes": shown }),
            ),
        };
        let subject = Subject {
            tenant: &caller.tenant,
            action,
            kind: ObjectKind::Tag,
            id: &tag,
        };
        self.audit.record(caller, subject, summary).await;
    }
}
