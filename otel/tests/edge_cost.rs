//! What tracing costs a redirect it does not record: no heap allocation, with tracing off and
//! with tracing on when the sampler does not pick the redirect. Counted by dhat's allocator,
//! in a process of its own (the trace pipeline is process-wide).

use std::time::Duration;

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

fn allocations(what: impl FnOnce()) -> u64 {
    let before = dhat::HeapStats::get().total_blocks;
    what();
    dhat::HeapStats::get().total_blocks - before
}

#[test]
fn an_unrecorded_redirect_allocates_nothing_for_tracing() {
    let _profiler = dhat::Profiler::builder().testing().build();
    // The count sees this thread's allocations.
    assert_eq!(
        allocations(|| drop(std::hint::black_box(Box::new(1u64)))),
        1
    );
    let get = http::Method::GET;
    let plain = http::HeaderMap::new();
    let mut unsampled = http::HeaderMap::new();
    unsampled.insert(
        "traceparent",
        http::HeaderValue::from_static("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"),
    );

    // Off: one flag read, even for a request that carries a trace context.
    assert!(!otel::enabled());
    let off = allocations(|| {
        assert!(otel::http::edge_span(&get, &plain).is_none());
        assert!(otel::http::edge_span(&get, &unsampled).is_none());
    });
    assert_eq!(off, 0, "tracing off");

    // On, with a root sampler that picks no redirect: the decision is made on the stack.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let _entered = runtime.enter();
    let vars = |name: &str| match name {
        "OTEL_EXPORTER_OTLP_ENDPOINT" => Some("http://127.0.0.1:9".to_string()),
        "OTEL_EXPORTER_OTLP_PROTOCOL" => Some("grpc".to_string()),
        "OTEL_TRACES_SAMPLER" => Some("parentbased_traceidratio".to_string()),
        "OTEL_TRACES_SAMPLER_ARG" => Some("0".to_string()),
        _ => None,
    };
    let settings = otel::Settings::from_vars(vars).expect("settings");
    let tracing = otel::Tracing::from_settings(settings, "test", "0")
        .expect("pipeline")
        .expect("tracing on");
    assert!(otel::enabled());
    let unpicked = allocations(|| {
        for _ in 0..100 {
            assert!(otel::http::edge_span(&get, &plain).is_none());
        }
    });
    assert_eq!(unpicked, 0, "tracing on, redirect not sampled");
    runtime.block_on(tracing.shutdown(Duration::from_secs(1)));
}
