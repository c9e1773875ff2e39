//! Tags: short labels a tenant files its links under and filters lists by.

use super::{Error, echo};

/// The most tags one link carries.
pub const MAX_TAGS: usize = 20;

/// Checks one tag: `[a-z0-9][a-z0-9._-]{0,63}` (`v2.0`, `example.com` and `q1_launch` are tags).
pub fn check_tag(tag: &str) -> Result<(), Error> {
    let mut chars = tag.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let rest_ok =
        chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-' | '.'));
    if first_ok && rest_ok && tag.len() <= 64 {
        Ok(())
    } else {
        Err(Error::invalid(
            "invalid_tag",
            format!(
                "tag {} must be 1 to 64 characters of a-z, 0-9, '_', '-' and '.', starting with a letter or digit{}",
                echo(tag),
                stored_as(tag)
            ),
        ))
    }
}

/// For text that is no tag but becomes one as imports and the Shlink API store a peer's tag
/// (`Q1 Launch` is `q1-launch`), a hint naming that tag; otherwise nothing.
pub fn stored_as(text: &str) -> String {
    let tag = peer_tag(text);
    if tag == text || tag.len() > 64 {
        return String::new();
    }
    let mut chars = tag.chars();
    let well_formed = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-' | '.'));
    if well_formed {
        format!(" (imports and the Shlink API store it as {})", echo(&tag))
    } else {
        String::new()
    }
}

/// A tag as another shortener takes it, made into the tag this node holds the way Shlink stores
/// one: trimmed, lower-cased, each space a `-` (`Summer Sale` is `summer-sale`). Used where
/// peers' tags come in (Shlink's API, imports); what is still no tag (`Q&A` is `q&a`) is refused by
/// [`check_tag`] after it.
pub fn peer_tag(tag: &str) -> String {
    tag.trim().to_lowercase().replace(' ', "-")
}

/// Checks a link's tags and returns them sorted without duplicates.
pub fn check_tags(tags: Vec<String>) -> Result<Vec<String>, Error> {
    // A list far past the bound is refused before it is sorted; one that holds the same tag
    // twice (`News` and `news` from a peer) counts it once.
    if tags.len() > MAX_TAGS * 8 {
        return Err(too_many(tags.len()));
    }
    for tag in &tags {
        check_tag(tag)?;
    }
    let mut tags = tags;
    tags.sort_unstable();
    tags.dedup();
    if tags.len() > MAX_TAGS {
        return Err(too_many(tags.len()));
    }
    Ok(tags)
}

fn too_many(count: usize) -> Error {
    Error::invalid(
        "invalid_tag",
        format!("a link has at most {MAX_TAGS} tags, not {count}"),
    )
}

/// A change of tags across every live link of one tenant that carries them: what the tag
/// endpoints (`/api/v1/tags/{tag}`, Shlink's `/rest/v3/tags`) ask of the store, which makes it
/// as one transaction (see [`crate::store::LinkStore::change_tag`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TagChange {
    /// `from` becomes `to` on every link that has `from`.
    Rename {
        /// The tag the links carry now.
        from: String,
        /// The tag they carry after (checked by [`check_tag`]).
        to: String,
    },
    /// These tags leave every link that has any of them.
    Delete(Vec<String>),
}

impl TagChange {
    /// The tags whose links the change touches.
    pub fn sought(&self) -> &[String] {
        match self {
            TagChange::Rename { from, .. } => std::slice::from_ref(from),
            TagChange::Delete(tags) => tags,
        }
    }

    /// A link's `tags` (sorted, without duplicates) after the change, kept so.
    pub fn apply(&self, tags: &[String]) -> Vec<String> {
        let mut new: Vec<String> = match self {
            TagChange::Rename { from, to } => tags
                .iter()
                .map(|t| if t == from { to.clone() } else { t.clone() })
                .collect(),
            TagChange::Delete(gone) => tags.iter().filter(|t| !gone.contains(t)).cloned().collect(),
        };
        new.sort_unstable();
        new.dedup();
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_checked_sorted_and_deduplicated() {
        let tags = check_tags(vec![
            "spring-2027".into(),
            "v2.0".into(),
            "a_b".into(),
            "0x".into(),
            "a_b".into(),
        ]);
        assert_eq!(tags.expect("valid"), ["0x", "a_b", "spring-2027", "v2.0"]);
        for bad in [
            "",
            "-x",
            ".x",
            "Upper",
            "sp ace",
            "a/b",
            "caf\u{e9}",
            &"a".repeat(65),
        ] {
            assert_eq!(
                check_tag(bad).expect_err(bad).code(),
                "invalid_tag",
                "{bad:?}"
            );
        }
        let many: Vec<String> = (0..21).map(|i| format!("t{i}")).collect();
        assert!(check_tags(many).is_err());
        // Twenty distinct tags, some given twice, are twenty.
        let twice: Vec<String> = (0..30).map(|i| format!("t{}", i % 20)).collect();
        assert_eq!(check_tags(twice).expect("twenty").len(), 20);
    }

    #[test]
    fn peers_tags_are_lower_cased_with_dashes_for_spaces() {
        for (given, held) in [
            ("Marketing", Ok("marketing")),
            ("summer sale", Ok("summer-sale")),
            (" Q1 Launch ", Ok("q1-launch")),
            ("already-fine_1", Ok("already-fine_1")),
            ("v2.0", Ok("v2.0")),
            ("Example.com", Ok("example.com")),
            ("Q&A", Err(())),
            (".hidden", Err(())),
            ("-lead", Err(())),
            ("", Err(())),
        ] {
            let tag = peer_tag(given);
            assert_eq!(
                check_tag(&tag).map(|()| tag.as_str()).map_err(drop),
                held,
                "{given:?}"
            );
        }
    }

    #[test]
    fn a_refusal_names_the_tag_a_peers_spelling_is_stored_as() {
        let said = check_tag("Q1 Launch").expect_err("spaces").public_message();
        assert!(said.contains("store it as \"q1-launch\""), "{said}");
        for no_hint in ["q&a", "Q&A", "", "-x"] {
            let said = check_tag(no_hint).expect_err(no_hint).public_message();
            assert!(!said.contains("store it as"), "{no_hint:?}: {said}");
        }
    }

    #[test]
    fn a_tag_change_keeps_the_tags_sorted() {
        let tags: Vec<String> = ["b", "m", "x"].map(String::from).to_vec();
        let rename = TagChange::Rename {
            from: "b".into(),
            to: "z".into(),
        };
        assert_eq!(rename.apply(&tags), ["m", "x", "z"]);
        assert_eq!(rename.sought(), ["b"]);
        let delete = TagChange::Delete(vec!["m".into(), "q".into()]);
        assert_eq!(delete.apply(&tags), ["b", "x"]);
        assert_eq!(TagChange::Delete(vec![]).apply(&tags), tags);
    }
}
