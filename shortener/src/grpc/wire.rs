//! The gRPC wire types' one conversion to and from domain types.

use crate::domain::{CreateInput, Error, Link, PublicBase};
use chrono::{DateTime, Utc};
use proto::shortener::v1 as pb;

fn timestamp(t: DateTime<Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.timestamp(),
        nanos: t.timestamp_subsec_nanos() as i32,
    }
}

fn from_timestamp(t: &prost_types::Timestamp) -> Result<DateTime<Utc>, Error> {
    u32::try_from(t.nanos)
        .ok()
        .and_then(|nanos| DateTime::from_timestamp(t.seconds, nanos))
        .ok_or_else(|| Error::invalid("invalid_expiry", "expires_at is not a valid timestamp"))
}

impl TryFrom<pb::CreateLinkRequest> for CreateInput {
    type Error = Error;

    fn try_from(item: pb::CreateLinkRequest) -> Result<Self, Error> {
        let expires_at = item.expires_at.as_ref().map(from_timestamp).transpose()?;
        Ok(CreateInput {
            url: item.url,
            alias: item.alias,
            expires_at,
            dedup: item.dedup,
            private: item.private,
            idempotency_key: item.idempotency_key,
        })
    }
}

/// `link` as the API shows it under `public`.
pub(super) fn link(public: &PublicBase, link: &Link) -> pb::Link {
    pb::Link {
        code: link.code.clone(),
        short_url: public.short_url(&link.code),
        url: link.url.clone(),
        created_at: Some(timestamp(link.created_at)),
        expires_at: link.expires_at.map(timestamp),
        deleted_at: link.deleted_at.map(timestamp),
        clicks: Some(pb::ClickCounts {
            human: link.clicks.human,
            head: link.clicks.head,
            bot: link.clicks.bot,
        }),
    }
}
