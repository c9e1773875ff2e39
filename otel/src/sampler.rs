//! The sampler of `OTEL_TRACES_SAMPLER`, and the decision for a request made before any span
//! exists.
//!
//! A request (an API call, a gRPC call, a redirect) gets a server span only when the sampler
//! picks it: [`EdgeSampler::decide`] follows the caller's context when it sent one, and
//! [`EdgeSampler::decide_root`] applies the root rule when it did not. An unpicked request
//! makes no span at all, so it pays nothing for the spans it would have made and its calls out
//! carry no context, as an unsampled span's would not. Every other span is the child of a
//! picked one. So a span without a parent exists only when it was picked: the SDK's sampler,
//! this one, keeps every root span as it comes, and a ratio is never applied twice (once to
//! the request, once more to its span with a new trace ID).

use crate::ConfigError;
use opentelemetry::trace::{Link, SpanKind, TraceContextExt, TraceId, TraceState};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{Sampler, SamplingDecision, SamplingResult, ShouldSample};

/// How a redirect that came with no trace context is decided, without asking the SDK's sampler
/// (whose answer it matches: a root span is kept when the low half of its random trace ID,
/// shifted right once, is below the ratio times 2^63).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Root {
    Always,
    Never,
    /// Kept when a random `u64 >> 1` is below this bound.
    Below(u64),
}

impl Root {
    fn ratio(ratio: f64) -> Root {
        Root::Below((ratio.max(0.0) * (1u64 << 63) as f64) as u64)
    }

    /// Whether a new root trace is kept: a flag, or one draw from the thread's generator.
    fn decide(self) -> bool {
        match self {
            Root::Always => true,
            Root::Never => false,
            Root::Below(bound) => (random_u128() as u64 >> 1) < bound,
        }
    }
}

/// The sampler `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` name (default
/// `parentbased_always_on`), and how it decides a root.
pub(crate) fn choose(
    name: Option<&str>,
    arg: Option<&str>,
) -> Result<(Sampler, Root), ConfigError> {
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
        "always_on" => (Sampler::AlwaysOn, Root::Always),
        "always_off" => (Sampler::AlwaysOff, Root::Never),
        "traceidratio" => {
            let r = ratio()?;
            (Sampler::TraceIdRatioBased(r), Root::ratio(r))
        }
        "parentbased_always_on" => (
            Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
            Root::Always,
        ),
        "parentbased_always_off" => (
            Sampler::ParentBased(Box::new(Sampler::AlwaysOff)),
            Root::Never,
        ),
        "parentbased_traceidratio" => {
            let r = ratio()?;
            (
                Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(r))),
                Root::ratio(r),
            )
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
    root: Root,
}

impl EdgeSampler {
    pub(crate) fn new(inner: Sampler, root: Root) -> Self {
        Self { inner, root }
    }

    /// Whether a redirect that came without trace context is to be recorded: what the
    /// configured sampler would say of a new root, at the cost of a flag or one random draw.
    pub(crate) fn decide_root(&self) -> bool {
        self.root.decide()
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
        if root {
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

/// A random 128-bit number for a trace ID, from a per-thread generator (wyrand) seeded once per
/// thread from the standard library's randomly keyed hasher: a few instructions a draw, no
/// lock, no allocation, no clock read. Only the sampler's decision uses it; the IDs of recorded
/// spans come from the SDK's own generator.
fn random_u128() -> u128 {
    use std::cell::Cell;
    use std::hash::{BuildHasher, RandomState};
    thread_local! {
        static STATE: Cell<u64> = Cell::new(RandomState::new().hash_one(std::thread::current().id()));
    }
    STATE.with(|state| {
        let next = || {
            let s = state.get().wrapping_add(0xa076_1d64_78bd_642f);
            state.set(s);
            let t = u128::from(s) * u128::from(s ^ 0xe703_7ed1_a0b4_28db);
            (t >> 64) as u64 ^ t as u64
        };
        (u128::from(next()) << 64) | u128::from(next())
    })
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
            choose(None, None).unwrap().0,
            Sampler::ParentBased(_)
        ));
        assert!(matches!(
            choose(Some("traceidratio"), Some("0.25")).unwrap().0,
            Sampler::TraceIdRatioBased(r) if r == 0.25
        ));
        assert!(choose(Some("traceidratio"), Some("2")).is_err());
        assert!(choose(Some("jaeger_remote"), None).is_err());
    }

    fn edge(name: &str, arg: Option<&str>) -> EdgeSampler {
        let (sampler, root) = choose(Some(name), arg).unwrap();
        EdgeSampler::new(sampler, root)
    }

    #[test]
    fn a_redirect_follows_its_callers_decision_and_the_root_ratio() {
        let never = edge("parentbased_always_off", None);
        assert!(!never.decide_root(), "no caller, root sampler off");
        assert!(never.decide(&remote(true)), "a sampled caller is followed");
        let always = edge("parentbased_always_on", None);
        assert!(always.decide_root());
        assert!(
            !always.decide(&remote(false)),
            "an unsampled caller is followed"
        );
        let ratio = edge("parentbased_traceidratio", Some("0.5"));
        let picked = (0..2000).filter(|_| ratio.decide_root()).count();
        assert!((800..1200).contains(&picked), "{picked} of 2000 at 0.5");
        let rare = edge("parentbased_traceidratio", Some("0.01"));
        let picked = (0..20_000).filter(|_| rare.decide_root()).count();
        assert!((120..280).contains(&picked), "{picked} of 20000 at 0.01");
        assert!(!edge("always_off", None).decide_root());
        assert!(edge("traceidratio", Some("1")).decide_root());
        assert!(!edge("traceidratio", Some("0")).decide_root());
    }

    #[test]
    fn the_root_rule_keeps_exactly_the_trace_ids_the_sdk_sampler_keeps() {
        for ratio in [0.0, 0.01, 0.25, 0.5, 0.999, 1.0] {
            let Root::Below(bound) = Root::ratio(ratio) else {
                panic!("a ratio gives a bound");
            };
            let sdk = Sampler::TraceIdRatioBased(ratio);
            for _ in 0..5_000 {
                let id = random_u128();
                let kept = sdk
                    .should_sample(None, TraceId::from(id), "x", &SpanKind::Server, &[], &[])
                    .decision
                    == SamplingDecision::RecordAndSample;
                assert_eq!(
                    kept,
                    (id as u64 >> 1) < bound,
                    "ratio {ratio}, id {id:032x}"
                );
            }
        }
    }

    #[test]
    fn trace_ids_drawn_for_decisions_do_not_repeat_within_or_across_threads() {
        let mut drawn: std::collections::HashSet<u128> =
            (0..10_000).map(|_| random_u128()).collect();
        assert_eq!(drawn.len(), 10_000);
        let other = std::thread::spawn(|| (0..10_000).map(|_| random_u128()).collect::<Vec<_>>());
        drawn.extend(other.join().unwrap());
        assert_eq!(drawn.len(), 20_000, "another thread drew the same IDs");
    }

    #[test]
    fn a_root_span_is_kept_as_it_comes_and_a_child_follows_its_parent() {
        let sampler = edge("parentbased_always_off", None);
        let kept = |parent: Option<&Context>| {
            sampler
                .should_sample(
                    parent,
                    TraceId::from(1u128),
                    "POST /x",
                    &SpanKind::Server,
                    &[],
                    &[],
                )
                .decision
                == SamplingDecision::RecordAndSample
        };
        assert!(kept(None), "a root span exists only once picked");
        assert!(kept(Some(&Context::new())), "an empty context is no parent");
        assert!(kept(Some(&remote(true))));
        assert!(!kept(Some(&remote(false))));
    }
}
