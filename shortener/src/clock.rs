//! The time analytics run on: the system clock in production, a clock a test sets by hand so
//! that hour boundaries, compaction and retention are driven without waiting.

use chrono::{DateTime, Utc};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// A source of the current time. Cheap to clone; clones of a manual clock share its time.
#[derive(Clone, Default)]
pub struct Clock {
    /// `None`: the system clock. `Some`: a time set by hand, in Unix milliseconds.
    manual: Option<Arc<AtomicI64>>,
}

impl Clock {
    /// The system clock.
    pub fn system() -> Self {
        Self::default()
    }

    /// A clock that stays at `at` until it is [`set`](Clock::set) or
    /// [`advanced`](Clock::advance).
    pub fn manual(at: DateTime<Utc>) -> Self {
        Self {
            manual: Some(Arc::new(AtomicI64::new(at.timestamp_millis()))),
        }
    }

    /// The current time.
    pub fn now(&self) -> DateTime<Utc> {
        match &self.manual {
            None => Utc::now(),
            Some(millis) => DateTime::from_timestamp_millis(millis.load(Ordering::Relaxed))
                .unwrap_or(DateTime::UNIX_EPOCH),
        }
    }

    /// The current time in Unix seconds.
    pub fn unix_seconds(&self) -> i64 {
        match &self.manual {
            None => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64),
            Some(millis) => millis.load(Ordering::Relaxed).div_euclid(1000),
        }
    }

    /// Sets a manual clock to `at`; a system clock ignores it.
    pub fn set(&self, at: DateTime<Utc>) {
        if let Some(millis) = &self.manual {
            millis.store(at.timestamp_millis(), Ordering::Relaxed);
        }
    }

    /// Moves a manual clock on by `by`; a system clock ignores it.
    pub fn advance(&self, by: chrono::Duration) {
        if let Some(millis) = &self.manual {
            millis.fetch_add(by.num_milliseconds(), Ordering::Relaxed);
        }
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.manual {
            None => f.write_str("Clock::system"),
            Some(_) => write!(f, "Clock::manual({})", self.now()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told_and_its_clones_follow() {
        let start = DateTime::parse_from_rfc3339("2026-03-01T10:59:59Z")
            .expect("time")
            .to_utc();
        let clock = Clock::manual(start);
        let clone = clock.clone();
        assert_eq!(clock.now(), start);
        clock.advance(chrono::Duration::seconds(1));
        assert_eq!(clone.unix_seconds(), start.timestamp() + 1);
        let system = Clock::system();
        system.set(start);
        assert!(system.now() > start, "the system clock is not set by hand");
    }
}
