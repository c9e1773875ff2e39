//! Environment variables a service is given but reads nowhere: a misspelled setting
//! (`SHORTENER_CACHE_SIZE` for `SHORTENER_CACHE_BYTES`) is otherwise ignored without a word,
//! and the service runs on a default its operator thinks they changed. Both services warn of
//! each at start, with the setting it most likely meant.

/// Every environment variable a setting of `command` or of its subcommands reads.
pub fn env_names(command: &clap::Command) -> Vec<String> {
    let mut names: Vec<String> = command
        .get_arguments()
        .filter_map(|arg| arg.get_env()?.to_str().map(str::to_string))
        .collect();
    for sub in command.get_subcommands() {
        names.extend(env_names(sub));
    }
    names
}

/// Logs a warning for each variable of this process's environment that begins with `prefix`
/// and that no setting of `command` reads, naming the setting it most likely meant, or else
/// where the settings are listed (`help`).
pub fn warn_of_unread(prefix: &str, command: &clap::Command, help: &str) {
    let known = env_names(command);
    let known: Vec<&str> = known.iter().map(String::as_str).collect();
    let names = std::env::vars_os().filter_map(|(name, _)| name.into_string().ok());
    for unread in unread_variables(prefix, &known, names) {
        let name = &unread.name;
        match &unread.meant {
            Some(meant) => tracing::warn!(
                variable = %name,
                "{name} is set but no setting reads it: did you mean {meant}?"
            ),
            None => tracing::warn!(
                variable = %name,
                "{name} is set but no setting reads it (`{help}` lists them)"
            ),
        }
    }
}

/// A variable of the service's prefix that no setting reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unread {
    /// Its name.
    pub name: String,
    /// The known setting one or two edits away, if any.
    pub meant: Option<String>,
}

/// The names in `vars` that begin with `prefix` and are not in `known`, in order of name,
/// each with the known name it most likely meant.
pub fn unread_variables<I, S>(prefix: &str, known: &[&str], vars: I) -> Vec<Unread>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    let mut unread: Vec<Unread> = vars
        .into_iter()
        .map(Into::into)
        .filter(|name| {
            name.starts_with(prefix) && !known.contains(&name.as_str()) && !service_link(name)
        })
        .map(|name| Unread {
            meant: meant(&name, known),
            name,
        })
        .collect();
    unread.sort_by(|a, b| a.name.cmp(&b.name));
    unread.dedup();
    unread
}

/// Whether `name` is one of the variables Kubernetes sets for each Service of the namespace
/// (`{SERVICE}_SERVICE_HOST`, `{SERVICE}_SERVICE_PORT[_{PORT}]`, `{SERVICE}_PORT`,
/// `{SERVICE}_PORT_{N}_{PROTOCOL}[_ADDR|_PORT|_PROTO]`): a Service named `shortener` or
/// `id-service` gives names with the services' prefixes that no operator set.
fn service_link(name: &str) -> bool {
    if name.ends_with("_SERVICE_HOST") || name.contains("_SERVICE_PORT") || name.ends_with("_PORT")
    {
        return true;
    }
    let parts: Vec<&str> = name.split('_').collect();
    parts.windows(3).any(|w| {
        w[0] == "PORT"
            && !w[1].is_empty()
            && w[1].bytes().all(|b| b.is_ascii_digit())
            && matches!(w[2], "TCP" | "UDP" | "SCTP")
    })
}

/// The known name a typo away from `name` (at most two edits), if any: a guess further off
/// would as likely mislead.
fn meant(name: &str, known: &[&str]) -> Option<String> {
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(name, k), *k))
        .filter(|(distance, _)| *distance <= 2)
        .min()
        .map(|(_, k)| k.to_string())
}

#[cfg(test)]
mod tests {
    use super::{Unread, unread_variables};

    #[test]
    fn unknown_names_of_the_prefix_are_found_with_what_they_meant() {
        let known = [
            "SHORTENER_CACHE_BYTES",
            "SHORTENER_HTTP_ADDR",
            "SHORTENER_CACHE_TTL",
        ];
        let vars = [
            "SHORTENER_HTTP_ADRR",
            "SHORTENER_CACHE_SIZE",
            "SHORTENER_HTTP_ADDR",
            "SHORTENER_NOTHING_LIKE_IT",
            "PATH",
            "ID_SERVICE_GRPC_ADDR",
            // What Kubernetes sets for Services named `shortener` and `shortener-admin`.
            "SHORTENER_SERVICE_HOST",
            "SHORTENER_SERVICE_PORT_HTTP",
            "SHORTENER_PORT",
            "SHORTENER_PORT_8080_TCP_ADDR",
            "SHORTENER_ADMIN_PORT_9090_TCP",
        ];
        let found = unread_variables("SHORTENER_", &known, vars);
        let unread = |name: &str, meant: Option<&str>| Unread {
            name: name.into(),
            meant: meant.map(Into::into),
        };
        assert_eq!(
            found,
            [
                unread("SHORTENER_CACHE_SIZE", None),
                unread("SHORTENER_HTTP_ADRR", Some("SHORTENER_HTTP_ADDR")),
                unread("SHORTENER_NOTHING_LIKE_IT", None),
            ]
        );
    }
}
