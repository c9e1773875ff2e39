//! A setting's value refused by the command line parser, said naming the environment variable
//! it came from: both services read nearly every setting from one, and clap names the flag.

/// A refused value of a setting that came from its environment variable (set, and its flag
/// not on the command line), said naming the variable: clap's own message names the flag,
/// which the caller never wrote. `command` is the command line the error came from; the
/// setting is looked up in it and its subcommands. `None` for any other error (a conflict between two settings,
/// say, which clap says well enough).
pub fn env_refusal(error: &clap::Error, command: &clap::Command) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !matches!(
        error.kind(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation
    ) {
        return None;
    }
    let text = |kind| match error.get(kind) {
        Some(ContextValue::String(text)) => Some(text.clone()),
        _ => None,
    };
    // "--redirect-status <REDIRECT_STATUS>"
    let arg = text(ContextKind::InvalidArg)?;
    let long = arg.trim_start_matches('-').split([' ', '=']).next()?;
    let flag = format!("--{long}");
    let written = std::env::args_os().any(|a| {
        a.to_str()
            .is_some_and(|a| a == flag || a.starts_with(&format!("{flag}=")))
    });
    if written {
        return None;
    }
    let setting = find_setting(command, long)?;
    let var = setting.get_env()?.to_string_lossy().into_owned();
    // What the setting is (its unit among it), from the first sentence of its help.
    let what = setting
        .get_help()
        .map(ToString::to_string)
        .and_then(|help| {
            let first = without_asides(help.split(". ").next()?);
            let first = first.trim_end_matches('.');
            // Lower case as it continues a sentence, unless a word in capitals (IPv6) leads.
            let mut chars = first.chars();
            let head = chars.next()?;
            let capitals = chars.clone().next().is_some_and(char::is_uppercase);
            Some(if capitals {
                first.to_string()
            } else {
                head.to_lowercase().chain(chars).collect::<String>()
            })
        });
    std::env::var_os(&var)?;
    let value = text(ContextKind::InvalidValue).unwrap_or_default();
    let why = match (
        error.get(ContextKind::ValidValue),
        std::error::Error::source(error),
    ) {
        (Some(ContextValue::Strings(valid)), _) => format!("not one of {}", valid.join(", ")),
        (_, Some(cause)) => cause.to_string(),
        _ => "not a valid value".to_string(),
    };
    let said = if why.contains(&value) {
        format!("{var}: {why}")
    } else {
        format!("{var}: {value:?}: {why}")
    };
    Some(match what {
        Some(what) => format!("{said} ({var} is: {what})"),
        None => said,
    })
}

/// A switch written `on` or `off` (or `true`/`false`, `yes`/`no`, `1`/`0`, in any case), as
/// both services read every switch.
pub fn parse_switch(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "1" | "yes" => Ok(true),
        "off" | "false" | "0" | "no" => Ok(false),
        _ => Err(format!("{text:?} is not on or off")),
    }
}

/// The argument of `command` (or of a subcommand) whose flag is `--long` and that has an
/// environment variable.
fn find_setting(command: &clap::Command, long: &str) -> Option<clap::Arg> {
    command
        .get_arguments()
        .find(|a| a.get_long() == Some(long) && a.get_env().is_some())
        .cloned()
        .or_else(|| {
            command
                .get_subcommands()
                .find_map(|sub| find_setting(sub, long))
        })
}

/// `text` without its parenthesized asides (`name (or resolve to) hosts` is `name hosts`), so
/// that what is left reads as one phrase.
fn without_asides(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn switches_are_read_in_any_of_the_usual_spellings() {
        for (text, on) in [
            ("on", true),
            ("TRUE", true),
            (" yes", true),
            ("1", true),
            ("Off", false),
            ("false", false),
            ("no", false),
            ("0", false),
        ] {
            assert_eq!(super::parse_switch(text), Ok(on), "{text}");
        }
        assert!(super::parse_switch("maybe").is_err());
    }

    #[test]
    fn asides_are_left_out_of_what_a_setting_is() {
        assert_eq!(
            super::without_asides("Whether webhook URLs may name (or resolve to) loopback hosts"),
            "Whether webhook URLs may name loopback hosts"
        );
        assert_eq!(
            super::without_asides("Public listener: redirects (and the API)"),
            "Public listener: redirects"
        );
    }
}
