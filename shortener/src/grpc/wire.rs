//! The gRPC wire types' one conversion to and from domain types.
//!
//! About 480 lines: every message of the API and its domain type side by side, so that a field
//! added to the proto has one place to be read and written, and the two directions are checked
//! against each other by reading one file.

use crate::domain::{
    Caller, CreateInput, CreateRules, DomainFilter, Error, Event, ImportInput, Link, ListInput,
    PatchInput, PublicBase,
};
use crate::links::{RowResult, RowStatus};
use chrono::{DateTime, Utc};
use prost_types::value::Kind;
use proto::shortener::v1 as pb;

fn timestamp(t: DateTime<Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.timestamp(),
        nanos: t.timestamp_subsec_nanos() as i32,
    }
}

fn from_timestamp(t: &prost_types::Timestamp) -> Result<DateTime<Utc>, Error> {
    time_of("expires_at", "invalid_expiry", t)
}

/// A timestamp of field `field`; `code` names what is wrong with one that is no time.
fn time_of(
    field: &str,
    code: &'static str,
    t: &prost_types::Timestamp,
) -> Result<DateTime<Utc>, Error> {
    u32::try_from(t.nanos)
        .ok()
        .and_then(|nanos| DateTime::from_timestamp(t.seconds, nanos))
        .ok_or_else(|| Error::invalid(code, format!("{field} is not a valid timestamp")))
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
            dedup_settings: false,
            private: item.private,
            idempotency_key: item.idempotency_key,
            tags: item.tags,
            max_visits: item.max_visits,
            password: item.password,
            domain: item.domain,
            rules: item.rules.into_iter().map(rule_input).collect(),
            ios: item.ios,
            android: item.android,
            variants: item.variants.into_iter().map(variant_input).collect(),
            utm: utm([
                item.utm_source,
                item.utm_medium,
                item.utm_campaign,
                item.utm_term,
                item.utm_content,
            ]),
            pass_query: item.pass_query,
            preview: preview([item.title, item.description, item.image]),
        })
    }
}

/// UTM parameters from their fields, in the messages' order (source, medium, campaign, term,
/// content), as a create and an import row carry them.
fn utm(
    [source, medium, campaign, term, content]: [Option<String>; 5],
) -> crate::domain::routes::Utm {
    crate::domain::routes::Utm {
        source,
        medium,
        campaign,
        term,
        content,
    }
}

/// A social preview from its fields (title, description, image).
fn preview([title, description, image]: [Option<String>; 3]) -> crate::domain::routes::Preview {
    crate::domain::routes::Preview {
        title,
        description,
        image,
    }
}

/// `link` as answered to `caller` (`created`: its request just made it): whole, or to a caller
/// that may not read it only its code and short URL, every other field left unset (see
/// [`crate::links::answers_whole`]).
pub(super) fn answer(caller: &Caller, created: bool, public: &PublicBase, link: &Link) -> pb::Link {
    if crate::links::answers_whole(caller, created) {
        self::link(public, link)
    } else {
        pb::Link {
            code: link.shown_code().to_string(),
            short_url: public.link_url(link),
            ..Default::default()
        }
    }
}

/// A rule as the API takes it, from its message.
pub(super) fn rule_input(rule: pb::Rule) -> crate::domain::RuleInput {
    use crate::domain::rules::{ConditionInput, ValueInput};
    crate::domain::RuleInput {
        url: rule.url,
        variants: rule.variants.into_iter().map(variant_input).collect(),
        conditions: rule
            .conditions
            .into_iter()
            .map(|c| ConditionInput {
                key: (c.r#type == "query" || !c.key.is_empty()).then_some(c.key),
                value: match c.values.len() {
                    0 => None,
                    1 => c.values.into_iter().next().map(ValueInput::One),
                    _ => Some(ValueInput::Many(c.values)),
                },
                kind: c.r#type,
            })
            .collect(),
    }
}

/// A variant as the API takes it, from its message.
fn variant_input(variant: pb::Variant) -> crate::domain::VariantInput {
    crate::domain::VariantInput {
        url: variant.url,
        weight: variant.weight,
    }
}

/// A variant as its message.
fn variant_message(variant: &crate::domain::Variant) -> pb::Variant {
    pb::Variant {
        url: variant.url.clone(),
        weight: i64::from(variant.weight),
    }
}

/// A rule as its message.
fn rule_message(rule: &crate::domain::Rule) -> pb::Rule {
    use crate::domain::rules::Condition;
    pb::Rule {
        url: rule.url.clone(),
        variants: rule.variants.iter().map(variant_message).collect(),
        conditions: rule
            .conditions
            .iter()
            .map(|c| {
                let (kind, value) = c.parts();
                let (key, values) = match c {
                    Condition::Query { key, values } => (key.clone(), values.clone()),
                    _ => (String::new(), vec![value]),
                };
                pb::Condition {
                    r#type: kind.to_string(),
                    key,
                    values,
                }
            })
            .collect(),
    }
}

/// The host `link` answers on: its branded domain, or the public URL's host.
fn domain_of(public: &PublicBase, link: &Link) -> String {
    link.domain
        .clone()
        .unwrap_or_else(|| public.host_str().to_string())
}

/// `link` as the API shows it under `public`.
pub(super) fn link(public: &PublicBase, link: &Link) -> pb::Link {
    pb::Link {
        code: link.shown_code().to_string(),
        short_url: public.link_url(link),
        domain: domain_of(public, link),
        url: link.url.clone(),
        created_at: Some(timestamp(link.created_at)),
        expires_at: link.expires_at.map(timestamp),
        deleted_at: link.deleted_at.map(timestamp),
        clicks: Some(pb::ClickCounts {
            human: link.clicks.human,
            head: link.clicks.head,
            bot: link.clicks.bot,
        }),
        tags: link.tags.clone(),
        disabled_at: link.disabled_at.map(timestamp),
        max_visits: link.max_visits,
        state: link.state(Utc::now()).name().to_string(),
        tenant: link.tenant.clone(),
        owner: link.owner.clone(),
        imported: link.import_batch.is_some(),
        protected: link.password.is_some(),
        rules: link.routes.rules.0.iter().map(rule_message).collect(),
        ios: link.routes.ios.clone(),
        android: link.routes.android.clone(),
        variants: link.routes.variants.iter().map(variant_message).collect(),
        utm_source: link.routes.utm.source.clone(),
        utm_medium: link.routes.utm.medium.clone(),
        utm_campaign: link.routes.utm.campaign.clone(),
        utm_term: link.routes.utm.term.clone(),
        utm_content: link.routes.utm.content.clone(),
        pass_query: link.routes.pass_query,
        title: link.routes.preview.title.clone(),
        description: link.routes.preview.description.clone(),
        image: link.routes.preview.image.clone(),
    }
}

/// The list a filter (and, for a list, a page size and cursor) asks for.
pub(super) fn list_input(
    filter: Option<pb::LinkFilter>,
    limit: Option<u32>,
    cursor: Option<String>,
    rules: &CreateRules,
) -> Result<ListInput, Error> {
    let filter = filter.unwrap_or_default();
    let date = |field: &str, t: Option<prost_types::Timestamp>| {
        t.map(|t| {
            u32::try_from(t.nanos)
                .ok()
                .and_then(|nanos| DateTime::from_timestamp(t.seconds, nanos))
                .ok_or_else(|| {
                    Error::bad_request("invalid_date", format!("{field} is not a valid timestamp"))
                })
        })
        .transpose()
    };
    Ok(ListInput {
        limit: limit.map(|n| n as usize),
        cursor,
        tag: filter.tag,
        host: filter.host,
        state: filter.state,
        created_after: date("created_after", filter.created_after)?,
        created_before: date("created_before", filter.created_before)?,
        q: filter.q,
        domain: DomainFilter::of(filter.domain.as_deref(), rules)?,
    })
}

/// The change an update asks for.
impl TryFrom<pb::UpdateLinkRequest> for PatchInput {
    type Error = Error;

    fn try_from(request: pb::UpdateLinkRequest) -> Result<Self, Error> {
        let both = |field: &str| {
            Error::bad_request(
                "conflicting_options",
                format!("give {field} or clear_{field}, not both"),
            )
        };
        let expires_at = match (request.expires_at, request.clear_expires_at) {
            (Some(_), true) => return Err(both("expires_at")),
            (Some(t), false) => Some(Some(from_timestamp(&t)?)),
            (None, true) => Some(None),
            (None, false) => None,
        };
        let max_visits = match (request.max_visits, request.clear_max_visits) {
            (Some(_), true) => return Err(both("max_visits")),
            (Some(n), false) => Some(Some(n)),
            (None, true) => Some(None),
            (None, false) => None,
        };
        let password = match (request.password, request.clear_password) {
            (Some(_), true) => return Err(both("password")),
            (Some(p), false) => Some(Some(p)),
            (None, true) => Some(None),
            (None, false) => None,
        };
        Ok(PatchInput {
            url: request.url,
            expires_at,
            tags: request.tags.map(|t| t.tags),
            disabled: request.disabled,
            max_visits,
            password,
            domain: request
                .move_to_domain
                .map(|host| Some(host).filter(|h| !h.is_empty())),
            rules: request
                .rules
                .map(|list| list.rules.into_iter().map(rule_input).collect()),
            ios: request.ios.map(|t| Some(t).filter(|t| !t.is_empty())),
            android: request.android.map(|t| Some(t).filter(|t| !t.is_empty())),
            variants: request
                .variants
                .map(|list| list.variants.into_iter().map(variant_input).collect()),
            utm: {
                let set = |v: Option<String>| v.map(|t| Some(t).filter(|t| !t.is_empty()));
                crate::domain::routes::UtmPatch {
                    source: set(request.utm_source),
                    medium: set(request.utm_medium),
                    campaign: set(request.utm_campaign),
                    term: set(request.utm_term),
                    content: set(request.utm_content),
                }
            },
            pass_query: request.pass_query,
            preview: {
                let set = |v: Option<String>| v.map(|t| Some(t).filter(|t| !t.is_empty()));
                crate::domain::routes::PreviewPatch {
                    title: set(request.title),
                    description: set(request.description),
                    image: set(request.image),
                }
            },
        })
    }
}

/// A JSON value as a protobuf value.
fn value(json: &serde_json::Value) -> prost_types::Value {
    use serde_json::Value as J;
    let kind = match json {
        J::Null => Kind::NullValue(0),
        J::Bool(b) => Kind::BoolValue(*b),
        J::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        J::String(s) => Kind::StringValue(s.clone()),
        J::Array(items) => Kind::ListValue(prost_types::ListValue {
            values: items.iter().map(value).collect(),
        }),
        J::Object(fields) => Kind::StructValue(structure(fields)),
    };
    prost_types::Value { kind: Some(kind) }
}

fn structure(fields: &serde_json::Map<String, serde_json::Value>) -> prost_types::Struct {
    prost_types::Struct {
        fields: fields.iter().map(|(k, v)| (k.clone(), value(v))).collect(),
    }
}

/// An event of a link's history.
pub(super) fn event(event: &Event) -> pb::LinkEvent {
    pb::LinkEvent {
        at: Some(timestamp(event.at)),
        key: event.key.clone(),
        kind: event.kind.name().to_string(),
        change: event.change.as_object().map(structure),
    }
}

/// An import row.
impl TryFrom<pb::ImportRow> for ImportInput {
    type Error = Error;

    /// A row as the HTTP import reads a link of an export: one that was disabled, deleted,
    /// used up or password protected where it comes from is refused, not made active
    /// ([`crate::domain::Origin`]).
    fn try_from(row: pb::ImportRow) -> Result<Self, Error> {
        let origin = crate::domain::Origin {
            state: Some(row.state).filter(|s| !s.is_empty()),
            protected: row.protected,
            clicks: row.clicks,
        };
        Ok(ImportInput {
            origin,
            url: row.url,
            code: row.code,
            tags: row.tags,
            expires_at: row.expires_at.as_ref().map(from_timestamp).transpose()?,
            created_at: row
                .created_at
                .as_ref()
                .map(|t| time_of("created_at", "invalid_created_at", t))
                .transpose()?,
            max_visits: row.max_visits,
            private: row.private,
            routes: crate::domain::RoutesInput {
                rules: row.rules.into_iter().map(rule_input).collect(),
                ios: row.ios,
                android: row.android,
                variants: row.variants.into_iter().map(variant_input).collect(),
                utm: utm([
                    row.utm_source,
                    row.utm_medium,
                    row.utm_campaign,
                    row.utm_term,
                    row.utm_content,
                ]),
                pass_query: row.pass_query,
                preview: preview([row.title, row.description, row.image]),
            },
            domain: row.domain,
            // A row over gRPC names its domain itself.
            short_host: None,
        })
    }
}

/// The result of an import row.
pub(super) fn row_result(result: RowResult, public: &PublicBase) -> pb::ImportLinksResponse {
    let short_url = result.short_url(public);
    let (status, error) = match result.status {
        RowStatus::Error(error) => ("error", Some(error.into())),
        other => (other.name(), None),
    };
    pb::ImportLinksResponse {
        outcome: Some(pb::import_links_response::Outcome::Row(
            pb::ImportRowResult {
                row: result.row,
                code: result.code,
                status: status.to_string(),
                error,
                short_url,
            },
        )),
    }
}

/// The stats input a request's range asks for (unset fields take their defaults).
pub(super) fn stats_input(
    range: Option<pb::StatsRange>,
) -> Result<crate::domain::StatsInput, Error> {
    let range = range.unwrap_or_default();
    let time = |field: &str, t: Option<prost_types::Timestamp>| {
        t.map(|t| {
            time_of(field, "invalid_time", &t)
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true))
        })
        .transpose()
    };
    Ok(crate::domain::StatsInput {
        from: time("from", range.from)?,
        to: time("to", range.to)?,
        granularity: (!range.granularity.is_empty()).then_some(range.granularity),
        top: (range.top > 0).then_some(range.top as usize),
    })
}

/// A stats report on the wire, with how far it reaches.
pub(super) fn stats(
    report: &crate::domain::StatsReport,
    freshness: crate::visits::analytics::Freshness,
) -> pb::Stats {
    let counts = |c: &crate::domain::ClickCounts| pb::ClickCounts {
        human: c.human,
        head: c.head,
        bot: c.bot,
    };
    let entries = |rows: Vec<(String, u64)>| -> Vec<pb::StatsEntry> {
        rows.into_iter()
            .map(|(key, visits)| pb::StatsEntry { key, visits })
            .collect()
    };
    let optional = |rows: &[(Option<String>, u64)]| {
        entries(
            rows.iter()
                .map(|(k, v)| (k.clone().unwrap_or_default(), *v))
                .collect(),
        )
    };
    pb::Stats {
        totals: Some(counts(&report.totals)),
        series: report
            .series
            .iter()
            .map(|p| pb::StatsPoint {
                at: Some(timestamp(
                    DateTime::from_timestamp(p.at, 0).unwrap_or(DateTime::UNIX_EPOCH),
                )),
                counts: Some(counts(&p.counts)),
            })
            .collect(),
        referrers: optional(&report.referrers),
        devices: entries(report.devices.clone()),
        countries: optional(&report.countries),
        links: entries(report.links.clone()),
        routes: entries(report.routes.clone()),
        as_of: Some(timestamp(
            DateTime::from_timestamp(freshness.as_of, 0).unwrap_or(DateTime::UNIX_EPOCH),
        )),
        flush_interval_ms: freshness.flush_interval.map_or(0, |d| d.as_millis() as u64),
    }
}
