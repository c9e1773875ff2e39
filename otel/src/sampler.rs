//! The sampler of `OTEL_TRACES_SAMPLER`, and the decision for redirects made before any span
//! exists.
//!
//! A redirect gets a span only when the sampler picks it. [`EdgeSampler::decide`] asks the
//! configured sampler first, with the caller's context if it sent one; only a picked redirect
//! makes a span. A root redirect (no incoming context) that was picked would be asked again
//! when its span starts, with a new trace ID, so a ratio would apply twice: the SDK's sampler,
//! this one, takes a redirect span ([`EDGE_SPANS`], names no other span has) with no parent
//! as already picked, since no such span exists unless it was.

use crate::ConfigError;
use opentelemetry::trace::{Link, SpanKind, TraceContextExt, TraceId, TraceState};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{Sampler, SamplingDecision, SamplingResult, ShouldSample};

/// The names of redirect spans, made only once [`EdgeSampler::decide`] picked them.
pub(crate) const EDGE_SPANS: [&str; 2] = ["GET /{code}", "HEAD /{code}"];

/// The sampler `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` name (default
/// `parentbased_always_on`).
pub(crate) fn from_vars(name: Option<&str>, arg: Option<&str>) -> Result<Sampler, ConfigError> {
    let ratio = || -> Result<f64, ConfigError> {
        match arg {
            None => Ok(1.0),
            Some(arg) => arg
                .parse::<f64>()
                .ok()
                .filter(|r| (0.0..=1.0).contains(r))
                .ok_or_else(|| ConfigError::Unsupported {
                    name: "OTEL_TRACES_SAMPLER_ARG",
                    value: arg.to_string(),
                    supported: "a ratio from 0 to 1",
                }),
        }
    };
    Ok(match name.unwrap_or("parentbased_always_on") {
        "always_on" => Sampler::AlwaysOn,
        "always_off" => Sampler::AlwaysOff,
        "traceidratio" => Sampler::TraceIdRatioBased(ratio()?),
        "parentbased_always_on" => Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
        "parentbased_always_off" => Sampler::ParentBased(Box::new(Sampler::AlwaysOff)),
        "parentbased_traceidratio" => {
            Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio()?)))
        }
        other => {
            return Err(ConfigError::Unsupported {
                name: "OTEL_TRACES_SAMPLER",
                value: other.to_string(),
                supported: "always_on, always_off, traceidratio, parentbased_always_on, \
                            parentbased_always_off or parentbased_traceidratio",
            });
        }
    })
}

/// The configured sampler, which also takes a root redirect picked by [`EdgeSampler::decide`]
/// as picked.
#[derive(Debug, Clone)]
pub(crate) struct EdgeSampler {
    inner: Sampler,
}

impl EdgeSampler {
    pub(crate) fn new(inner: Sampler) -> Self {
        Self { inner }
    }

    /// Whether a redirect with caller context `parent` (an empty context: none) is to be
    /// recorded. Allocates nothing.
    pub(crate) fn decide(&self, parent: &Context) -> bool {
        let has_parent = parent.has_active_span();
        let trace_id = if has_parent {
            parent.span().span_context().trace_id()
        } else {
            TraceId::from(random_u128())
        };
        let result = self.inner.should_sample(
            has_parent.then_some(parent),
            trace_id,
            "GET /{code}",
            &SpanKind::Server,
            &[],
            &[],
        );
        result.decision == SamplingDecision::RecordAndSample
    }
}

impl ShouldSample for EdgeSampler {
    fn should_sample(
        &self,
        parent_context: Option<&Context>,
        trace_id: TraceId,
        name: &str,
        span_kind: &SpanKind,
        attributes: &[KeyValue],
        links: &[Link],
    ) -> SamplingResult {
        let root = parent_context.is_none_or(|cx| !cx.has_active_span());
        if root && EDGE_SPANS.contains(&name) {
            return SamplingResult {
                decision: SamplingDecision::RecordAndSample,
                attributes: Vec::new(),
                trace_state: TraceState::default(),
            };
        }
        self.inner
            .should_sample(parent_context, trace_id, name, span_kind, attributes, links)
    }
}

/// A random 128-bit number for a trace ID, from the standard library's randomly keyed hasher
/// (no state shared between threads, no allocation).
fn random_u128() -> u128 {
    use std::hash::{BuildHasher, RandomState};
    let state = RandomState::new();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let high = state.hash_one(nanos) as u128;
    let low = state.hash_one(high) as u128;
    (high << 64) | low
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags};

    fn remote(sampled: bool) -> Context {
        let flags = if sampled {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        };
        Context::new().with_remote_span_context(SpanContext::new(
            TraceId::from(7u128),
            SpanId::from(9u64),
            flags,
            true,
            TraceState::default(),
        ))
    }

    #[test]
    fn samplers_are_named_by_the_standard_values() {
        assert!(matches!(
            from_vars(None, None).unwrap(),
            Sampler::ParentBased(_)
        ));
        assert!(matches!(
            from_vars(Some("traceidratio"), Some("0.25")).unwrap(),
            Sampler::TraceIdRatioBased(r) if r == 0.25
        ));
        assert!(from_vars(Some("traceidratio"), Some("2")).is_err());
        assert!(from_vars(Some("jaeger_remote"), None).is_err());
    }

    #[test]
    fn a_redirect_follows_its_callers_decision_and_the_root_ratio() {
        let parent_based = |root| EdgeSampler::new(Sampler::ParentBased(Box::new(root)));
        let never = parent_based(Sampler::AlwaysOff);
        assert!(
            !never.decide(&Context::new()),
            "no caller, root sampler off"
        );
        assert!(never.decide(&remote(true)), "a sampled caller is followed");
        let always = parent_based(Sampler::AlwaysOn);
        assert!(always.decide(&Context::new()));
        assert!(
            !always.decide(&remote(false)),
            "an unsampled caller is followed"
        );
        let ratio = parent_based(Sampler::TraceIdRatioBased(0.5));
        let picked = (0..2000).filter(|_| ratio.decide(&Context::new())).count();
        assert!((800..1200).contains(&picked), "{picked} of 2000 at 0.5");
    }

    #[test]
    fn a_picked_root_redirect_is_not_sampled_twice() {
        let sampler = EdgeSampler::new(Sampler::ParentBased(Box::new(Sampler::AlwaysOff)));
        let result = sampler.should_sample(
            None,
            TraceId::from(1u128),
            EDGE_SPANS[1],
            &SpanKind::Server,
            &[],
            &[],
        );
        assert_eq!(result.decision, SamplingDecision::RecordAndSample);
        let other = sampler.should_sample(
            None,
            TraceId::from(1u128),
            "POST /x",
            &SpanKind::Server,
            &[],
            &[],
        );
        assert_eq!(other.decision, SamplingDecision::Drop);
    }
}
