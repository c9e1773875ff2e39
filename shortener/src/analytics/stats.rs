//! Answering stats requests: the request checked at the analytics clock's time against the
//! retention, the caller's right to the link checked by the link service (another tenant's
//! code is not found), then one read of the rollups.

use super::Analytics;
use crate::domain::{
    Caller, Error, ShortCode, StatsInput, StatsQuery, StatsReport, StatsScope, check_tag,
};
use crate::links::LinkService;
use crate::store::{LinkStore, Store};

impl Analytics {
    /// The query `input` asks for over `scope`, checked at the clock's time.
    pub fn query(&self, scope: StatsScope, input: StatsInput) -> Result<StatsQuery, Error> {
        input.parse(scope, self.clock.now(), self.settings.retention_days)
    }

    /// The stats of one link of the caller's tenant (any tenant's for `admin`).
    pub async fn link_stats(
        &self,
        links: &LinkService,
        store: &Store,
        caller: &Caller,
        code: &ShortCode,
        input: StatsInput,
    ) -> Result<(StatsQuery, StatsReport), Error> {
        let query = self.query(StatsScope::Link(code.as_str().to_string()), input)?;
        links.get(caller, code).await?;
        let report = store.stats(&query).await?;
        Ok((query, report))
    }

    /// The stats of the caller's tenant (every tenant's for `admin`), or of its links with
    /// `tag`, with the top links.
    pub async fn tenant_stats(
        &self,
        store: &Store,
        caller: &Caller,
        tag: Option<String>,
        input: StatsInput,
    ) -> Result<(StatsQuery, StatsReport), Error> {
        if let Some(tag) = &tag {
            check_tag(tag)?;
        }
        let scope = StatsScope::Links {
            tenant: caller.tenant_scope().map(str::to_string),
            tag,
        };
        let query = self.query(scope, input)?;
        let report = store.stats(&query).await?;
        Ok((query, report))
    }
}
