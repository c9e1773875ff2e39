//! What a part of the node reports at scrape time, in its own words: the part names its
//! series and gives their values to [`Samples`]; how they are encoded stays here, so the
//! metrics module needs to know nothing of the parts.

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use std::fmt;

/// A part of the node whose values are read at scrape time.
pub trait Sample: Send + Sync {
    /// Writes the part's series to `out`.
    fn sample(&self, out: &mut Samples<'_, '_>) -> fmt::Result;
}

/// Where a [`Sample`] writes its series.
pub struct Samples<'a, 'e> {
    encoder: &'a mut DescriptorEncoder<'e>,
}

impl<'a, 'e> Samples<'a, 'e> {
    /// Series written to `encoder`.
    pub(super) fn new(encoder: &'a mut DescriptorEncoder<'e>) -> Self {
        Self { encoder }
    }

    /// A counter `name` (exposed with `_total`) with `help`.
    pub fn counter(&mut self, name: &str, help: &str, value: u64) -> fmt::Result {
        let metric = ConstCounter::new(value);
        metric.encode(
            self.encoder
                .encode_descriptor(name, help, None, metric.metric_type())?,
        )
    }

    /// A gauge `name` with `help`.
    pub fn gauge(&mut self, name: &str, help: &str, value: f64) -> fmt::Result {
        let metric = ConstGauge::new(value);
        metric.encode(
            self.encoder
                .encode_descriptor(name, help, None, metric.metric_type())?,
        )
    }

    /// A family of counters `name` with `help`, one per set of `N` labels in `series` (the
    /// family is described even when it has none).
    pub fn counters<'l, const N: usize>(
        &mut self,
        name: &str,
        help: &str,
        series: impl IntoIterator<Item = ([(&'l str, &'l str); N], u64)>,
    ) -> fmt::Result {
        let mut family = self
            .encoder
            .encode_descriptor(name, help, None, MetricType::Counter)?;
        for (labels, value) in series {
            ConstCounter::new(value).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }

    /// A family of gauges `name` with `help`, one per set of `N` labels in `series` (the
    /// family is described even when it has none).
    pub fn gauges<'l, const N: usize>(
        &mut self,
        name: &str,
        help: &str,
        series: impl IntoIterator<Item = ([(&'l str, &'l str); N], f64)>,
    ) -> fmt::Result {
        let mut family = self
            .encoder
            .encode_descriptor(name, help, None, MetricType::Gauge)?;
        for (labels, value) in series {
            ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}
