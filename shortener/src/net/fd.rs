//! The open-file limit, raised and split between the listeners.

/// Descriptors kept for everything but client connections: the store's pool, the SQLite files,
/// the id-service channel, logs.
const OVERHEAD: u64 = 64;

/// Raises the soft limit of open files to the hard limit; returns the limit in force.
pub fn raise_open_files() -> u64 {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => limit,
        Err(error) => {
            tracing::warn!(%error, "could not raise the limit of open files");
            rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(1024, |(soft, _)| soft)
        }
    }
}

/// How many connections each listener may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// The public listener (redirects, JSON API).
    pub public: usize,
    /// The gRPC listener.
    pub grpc: usize,
    /// The admin listener.
    pub admin: usize,
}

impl Budget {
    /// The split of `limit` open files for a node whose store pool holds `pool` connections,
    /// keeping `reserve` (0: a quarter of the limit) for the public listener alone.
    pub fn split(limit: u64, pool: usize, reserve: u64) -> Self {
        let usable = limit.saturating_sub(OVERHEAD + pool as u64).max(16);
        let reserve = if reserve == 0 {
            usable / 4
        } else {
            reserve.min(usable / 2)
        };
        let internal = usable - reserve;
        let admin = (internal / 8).clamp(2, 64);
        Self {
            public: usable as usize,
            grpc: internal.saturating_sub(admin).max(1) as usize,
            admin: admin as usize,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_internal_listeners_leave_the_reserve_to_the_public_one() {
        for (limit, pool, reserve) in [
            (256, 16, 0),
            (1024, 16, 0),
            (1 << 20, 64, 0),
            (4096, 8, 500),
        ] {
            let budget = Budget::split(limit, pool, reserve);
            let usable = (limit - 64 - pool as u64) as usize;
            assert_eq!(budget.public, usable, "{limit}");
            assert!(budget.grpc + budget.admin < usable, "{limit}: {budget:?}");
            let left = usable - budget.grpc - budget.admin;
            let expected = if reserve == 0 {
                usable / 4
            } else {
                reserve as usize
            };
            assert!(
                left >= expected,
                "{limit}: {left} left for the public port, want {expected}"
            );
        }
    }
}
