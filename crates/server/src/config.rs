//! The settings file: `mercer --config mercer.toml` (or `MERCER_CONFIG`), in TOML.
//!
//! Every flag can be given there: the global ones (`database_url`, `log_level`, `log_format`)
//! at the top, each command's in a table named after it (`[serve]`, `[jobs.list]`), keys being
//! the flags' long names with `_` for `-`. A flag on the command line wins over its environment
//! variable, which wins over the file, which wins over the default. A key the command line does
//! not know is refused, naming it, so a typo is never silently ignored.
//!
//! The file's values are handed to clap as if they were flags, appended after those given, for
//! every setting the command line and the environment left unset: clap then checks them as it
//! checks flags, and the command parses as usual.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, CommandFactory, FromArgMatches};

use crate::cli::Cli;

/// Where a setting's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A flag on the command line.
    Flag,
    /// Its environment variable.
    Environment,
    /// The settings file.
    File,
    /// Its default.
    Default,
    /// Nowhere: it is unset.
    Unset,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Flag => "flag",
            Origin::Environment => "environment",
            Origin::File => "file",
            Origin::Default => "default",
            Origin::Unset => "unset",
        }
    }
}

/// One setting's effective value (secrets redacted) and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// Its key in the file: the flag's long name with `_` for `-`.
    pub key: String,
    /// Its value as given (a list joined with `, `), redacted when it is a secret.
    pub value: Option<String>,
    pub origin: Origin,
}

/// Why the settings could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {reason}")]
    File { path: String, reason: String },
    #[error(transparent)]
    Clap(#[from] clap::Error),
}

/// The settings that are secrets: shown as `***`, a database URL with its password hidden.
const SECRETS: [&str; 2] = ["metrics_token", "secret"];

/// The file's key of an argument, if it has a long flag.
fn key_of(arg: &clap::Arg) -> Option<String> {
    arg.get_long().map(|long| long.replace('-', "_"))
}

/// The command (or subcommand) at `path` below the top.
fn command_at<'a>(top: &'a clap::Command, path: &[String]) -> Option<&'a clap::Command> {
    path.iter()
        .try_fold(top, |command, name| command.find_subcommand(name))
}

/// Arguments a table may set: the command's own flags (the global ones belong at the top).
fn settable(command: &clap::Command, top_level: bool) -> Vec<&clap::Arg> {
    command
        .get_arguments()
        .filter(|arg| arg.get_long().is_some())
        .filter(|arg| arg.is_global_set() == top_level)
        .filter(|arg| !matches!(arg.get_id().as_str(), "config" | "help" | "version"))
        .collect()
}

/// A value of the file, checked against its argument, as the flags to append.
fn flags_for(arg: &clap::Arg, value: &toml::Value, name: &str) -> Result<Vec<OsString>, String> {
    let long = arg.get_long().unwrap_or_default();
    if matches!(arg.get_action(), ArgAction::SetTrue) {
        return match value {
            toml::Value::Boolean(true) => Ok(vec![format!("--{long}").into()]),
            toml::Value::Boolean(false) => Ok(Vec::new()),
            _ => Err(format!("{name}: give true or false")),
        };
    }
    let items: Vec<&toml::Value> = match value {
        toml::Value::Array(items) if matches!(arg.get_action(), ArgAction::Append) => {
            items.iter().collect()
        }
        toml::Value::Array(_) => return Err(format!("{name}: give one value, not a list")),
        one => vec![one],
    };
    items
        .into_iter()
        .map(|item| {
            let text = match item {
                toml::Value::String(text) => text.clone(),
                toml::Value::Integer(number) => number.to_string(),
                toml::Value::Float(number) => number.to_string(),
                toml::Value::Boolean(flag) => flag.to_string(),
                _ => return Err(format!("{name}: give a string, a number or true/false")),
            };
            Ok(format!("--{long}={text}").into())
        })
        .collect()
}

/// A key of a table and the flags its value becomes.
type KeyFlags = (String, Vec<OsString>);

/// What the file sets: per table (a command's path), its keys' values as flags.
struct FileSettings {
    tables: Vec<(Vec<String>, Vec<KeyFlags>)>,
}

/// Reads and checks the file: every key must be a flag of the command its table names.
fn read_file(path: &Path) -> Result<FileSettings, ConfigError> {
    let fail = |reason: String| ConfigError::File {
        path: path.display().to_string(),
        reason,
    };
    let text =
        std::fs::read_to_string(path).map_err(|error| fail(format!("cannot read: {error}")))?;
    let table: toml::Table = text.parse().map_err(|error: toml::de::Error| {
        fail(format!("not valid TOML: {}", error.to_string().trim()))
    })?;
    let mut settings = FileSettings { tables: Vec::new() };
    collect(&Cli::command(), &[], &table, &mut settings).map_err(fail)?;
    Ok(settings)
}

/// One table's keys: flags of `command`, or tables of its subcommands.
fn collect(
    command: &clap::Command,
    path: &[String],
    table: &toml::Table,
    settings: &mut FileSettings,
) -> Result<(), String> {
    let at_top = path.is_empty();
    let args = settable(command, at_top);
    let mut flags = Vec::new();
    for (key, value) in table {
        let name = if at_top {
            key.clone()
        } else {
            format!("[{}] {key}", path.join("."))
        };
        if let Some(arg) = args.iter().find(|arg| key_of(arg).as_deref() == Some(key)) {
            flags.push((key.clone(), flags_for(arg, value, &name)?));
            continue;
        }
        match (value, command.find_subcommand(key)) {
            (toml::Value::Table(inner), Some(sub)) => {
                let mut inner_path = path.to_vec();
                inner_path.push(key.clone());
                collect(sub, &inner_path, inner, settings)?;
            }
            _ => {
                let known: Vec<String> = args.iter().filter_map(|arg| key_of(arg)).collect();
                let hint = if key == "config" {
                    "the settings file cannot name another".to_string()
                } else if known.is_empty() {
                    "this table takes no keys".to_string()
                } else {
                    format!("known keys here: {}", known.join(", "))
                };
                return Err(format!("unknown key {name}: {hint}"));
            }
        }
    }
    settings.tables.push((path.to_vec(), flags));
    Ok(())
}

/// The matches of the subcommand at `path`, if that is the one being run.
fn matches_at<'a>(matches: &'a ArgMatches, path: &[String]) -> Option<&'a ArgMatches> {
    path.iter().try_fold(matches, |matches, name| {
        matches
            .subcommand()
            .filter(|(running, _)| running == name)
            .map(|(_, sub)| sub)
    })
}

/// Whether the command line or the environment set `id` (then the file does not).
fn set_outside_file(matches: &ArgMatches, id: &str) -> bool {
    matches!(
        matches
            .try_get_raw(id)
            .ok()
            .flatten()
            .and(matches.value_source(id)),
        Some(ValueSource::CommandLine | ValueSource::EnvVariable)
    )
}

/// The command line parsed with the file's values for what it left unset.
struct Resolved {
    matches: ArgMatches,
    /// The settings the file gave: (table, key).
    from_file: BTreeSet<(Vec<String>, String)>,
    file: Option<PathBuf>,
}

/// Parses `args` once to learn the settings file and what the command line and the
/// environment set, then again with the file's values appended for the rest.
fn resolve(args: Vec<OsString>) -> Result<Resolved, ConfigError> {
    let first = Cli::command()
        .ignore_errors(true)
        .try_get_matches_from(&args)
        .ok();
    let file = first
        .as_ref()
        .and_then(|m| m.get_one::<PathBuf>("config").cloned())
        .or_else(|| std::env::var_os("MERCER_CONFIG").map(PathBuf::from))
        .filter(|path| !path.as_os_str().is_empty());
    let mut from_file = BTreeSet::new();
    let mut full = args;
    if let Some(path) = &file {
        for (table, flags) in read_file(path)?.tables {
            // Only the tables of the command being run apply.
            let Some(running) = first.as_ref().and_then(|m| matches_at(m, &table)) else {
                continue;
            };
            for (key, values) in flags {
                if !set_outside_file(running, &key) && !values.is_empty() {
                    from_file.insert((table.clone(), key));
                    full.extend(values);
                }
            }
        }
    }
    let matches = Cli::command()
        .try_get_matches_from(&full)
        .map_err(|error| blame_file(error, file.as_deref(), &from_file))?;
    Ok(Resolved {
        matches,
        from_file,
        file,
    })
}

/// A value clap refused, reported under the file's key when the file gave it (clap names the
/// flag it was handed as).
fn blame_file(
    error: clap::Error,
    file: Option<&Path>,
    from_file: &BTreeSet<(Vec<String>, String)>,
) -> ConfigError {
    use clap::error::{ContextKind, ContextValue};
    let flag = match error.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(flag)) => flag.clone(),
        _ => return error.into(),
    };
    let long = flag
        .trim_start_matches("--")
        .split([' ', '='])
        .next()
        .unwrap_or_default()
        .replace('-', "_");
    let (Some(file), Some((table, key))) = (file, from_file.iter().find(|(_, key)| *key == long))
    else {
        return error.into();
    };
    let name = match table.is_empty() {
        true => key.clone(),
        false => format!("[{}] {key}", table.join(".")),
    };
    let text = error.to_string();
    let why = text.lines().next().unwrap_or_default();
    ConfigError::File {
        path: file.display().to_string(),
        reason: format!("{name}: {}", why.trim_start_matches("error: ")),
    }
}

/// The command line of `args`, with the settings file's values for what it left unset.
pub fn load<I, T>(args: I) -> Result<Cli, ConfigError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let resolved = resolve(args.into_iter().map(Into::into).collect())?;
    let mut cli = Cli::from_arg_matches(&resolved.matches)?;
    cli.settings = Settings {
        global: settings_of(&resolved.matches, &[], &resolved.from_file),
        file: resolved.file,
    };
    Ok(cli)
}

/// The effective settings of the command at `table` (the top for `[]`): every flag it takes,
/// with its value (secrets redacted) and where it came from.
fn settings_of(
    matches: &ArgMatches,
    table: &[String],
    from_file: &BTreeSet<(Vec<String>, String)>,
) -> Vec<Setting> {
    let top = Cli::command();
    let (Some(command), Some(running)) = (command_at(&top, table), matches_at(matches, table))
    else {
        return Vec::new();
    };
    let mut settings = Vec::new();
    for arg in settable(command, table.is_empty()) {
        let id = arg.get_id().as_str();
        let key = key_of(arg).unwrap_or_default();
        let raw: Option<Vec<String>> = running.try_get_raw(id).ok().flatten().map(|values| {
            values
                .map(|value| value.to_string_lossy().into_owned())
                .collect()
        });
        let origin = match (raw.is_some(), running.value_source(id)) {
            (false, _) => Origin::Unset,
            _ if from_file.contains(&(table.to_vec(), key.clone())) => Origin::File,
            (true, Some(ValueSource::CommandLine)) => Origin::Flag,
            (true, Some(ValueSource::EnvVariable)) => Origin::Environment,
            (true, _) => Origin::Default,
        };
        let value = raw.map(|values| redact(&key, values.join(", ")));
        settings.push(Setting { key, value, origin });
    }
    settings
}

/// A secret's value hidden: `***`, a database URL's password only.
fn redact(key: &str, value: String) -> String {
    if key == "database_url" {
        return mercer_store::DatabaseUrl::parse(&value)
            .map(|url| url.redacted())
            .unwrap_or_else(|_| "***".to_string());
    }
    if SECRETS.contains(&key) && !value.is_empty() {
        return "***".to_string();
    }
    value
}

/// What the settings file gave, for `mercer config show`.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// The settings file read, if any.
    pub file: Option<PathBuf>,
    /// The global settings.
    pub global: Vec<Setting>,
}

/// The effective settings `mercer serve` would run with, given the same settings file and
/// environment: for `mercer config show`.
pub fn serve_settings(file: Option<&Path>) -> Result<Vec<Setting>, ConfigError> {
    let mut args: Vec<OsString> = vec!["mercer".into()];
    if let Some(file) = file {
        let mut flag = OsString::from("--config=");
        flag.push(file);
        args.push(flag);
    }
    args.push("serve".into());
    let resolved = resolve(args)?;
    Ok(settings_of(
        &resolved.matches,
        &["serve".to_string()],
        &resolved.from_file,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> tempfile_path::TempFile {
        tempfile_path::TempFile::with(text)
    }

    /// A file in the system's temporary directory, removed when dropped.
    mod tempfile_path {
        pub struct TempFile(pub std::path::PathBuf);
        impl TempFile {
            pub fn with(text: &str) -> TempFile {
                use std::sync::atomic::{AtomicU32, Ordering};
                static NEXT: AtomicU32 = AtomicU32::new(0);
                let path = std::env::temp_dir().join(format!(
                    "mercer-config-{}-{}.toml",
                    std::process::id(),
                    NEXT.fetch_add(1, Ordering::Relaxed)
                ));
                let mut file = std::fs::File::create(&path).unwrap();
                std::io::Write::write_all(&mut file, text.as_bytes()).unwrap();
                TempFile(path)
            }
        }
        impl Drop for TempFile {
            fn drop(&mut self) {
                let _ = std::fs::remove_file(&self.0);
            }
        }
    }

    fn serve_args(cli: &Cli) -> &crate::cli::ServeArgs {
        match &cli.command {
            crate::cli::Command::Serve(args) => args,
            other => panic!("not serve: {other:?}"),
        }
    }

    fn origin(settings: &[Setting], key: &str) -> (Option<String>, Origin) {
        let found = settings.iter().find(|s| s.key == key).unwrap();
        (found.value.clone(), found.origin)
    }

    #[test]
    fn a_flag_wins_over_the_file_which_wins_over_the_default() {
        let settings = file(
            "database_url = \"sqlite://from-file.db\"\nlog_level = \"debug\"\n\n\
             [serve]\nbind = \"127.0.0.1:9999\"\ndb_pool_size = 3\nallow_private_targets = true\n\
             webhook_retry_schedule = \"1s,2s\"\n",
        );
        let config = format!("--config={}", settings.0.display());
        let cli = load([
            "mercer",
            &config,
            "--log-level",
            "warn",
            "serve",
            "--db-pool-size",
            "7",
        ])
        .unwrap();
        assert_eq!(
            cli.database_url, "sqlite://from-file.db",
            "file over default"
        );
        assert_eq!(cli.log_level, "warn", "flag over file");
        let serve = serve_args(&cli);
        assert_eq!(serve.bind, "127.0.0.1:9999");
        assert_eq!(serve.db_pool_size, 7, "flag over file");
        assert!(serve.allow_private_targets);
        assert_eq!(serve.webhook_retry_schedule, "1s,2s");
        assert_eq!(serve.webhook_lease, 60, "default where nothing sets it");
        let global = &cli.settings.global;
        assert_eq!(
            origin(global, "log_level"),
            (Some("warn".into()), Origin::Flag)
        );
        assert_eq!(
            origin(global, "database_url"),
            (Some("sqlite://from-file.db".into()), Origin::File)
        );
        assert_eq!(origin(global, "log_format").1, Origin::Default);
    }

    #[test]
    fn without_a_file_the_command_line_parses_as_before() {
        let cli = load(["mercer", "serve", "--bind", "127.0.0.1:0"]).unwrap();
        assert_eq!(serve_args(&cli).bind, "127.0.0.1:0");
        assert_eq!(cli.settings.file, None);
    }

    #[test]
    fn a_table_of_another_command_is_checked_but_not_applied() {
        let settings = file("[serve]\nbind = \"127.0.0.1:9\"\n[jobs.list]\nlimit = 5\n");
        let config = format!("--config={}", settings.0.display());
        let cli = load(["mercer", &config, "jobs", "list"]).unwrap();
        match cli.command {
            crate::cli::Command::Jobs(crate::cli::JobsCommand::List { limit, .. }) => {
                assert_eq!(limit, 5)
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused_with_their_names() {
        for (text, expected) in [
            (
                "databse_url = \"sqlite://x.db\"\n",
                "unknown key databse_url",
            ),
            (
                "[serve]\nbnd = \"127.0.0.1:1\"\n",
                "unknown key [serve] bnd",
            ),
            ("[serv]\nbind = \"127.0.0.1:1\"\n", "unknown key serv"),
            ("[serve]\ndb_pool_size = \"many\"\n", "[serve] db_pool_size"),
            (
                "[serve]\nallow_private_targets = \"yes\"\n",
                "true or false",
            ),
            ("[serve]\nbind = [\"a\", \"b\"]\n", "not a list"),
            ("[serve\n", "not valid TOML"),
        ] {
            let settings = file(text);
            let config = format!("--config={}", settings.0.display());
            let error = load(["mercer", &config, "serve"]).unwrap_err().to_string();
            assert!(error.contains(expected), "{text:?}: {error}");
            assert!(error.contains(&settings.0.display().to_string()), "{error}");
        }
        let missing = load(["mercer", "--config=/nonexistent/mercer.toml", "migrate"]);
        assert!(missing.unwrap_err().to_string().contains("cannot read"));
    }

    #[test]
    fn secrets_are_redacted_in_the_settings_shown() {
        let settings = file(
            "database_url = \"postgres://u:hunter2@127.0.0.1/db\"\n\
             [serve]\nmetrics_token = \"scrape-secret\"\n",
        );
        let config = format!("--config={}", settings.0.display());
        let cli = load(["mercer", &config, "config", "show"]).unwrap();
        let url = origin(&cli.settings.global, "database_url").0.unwrap();
        assert!(
            !url.contains("hunter2") && url.contains("127.0.0.1"),
            "{url}"
        );
        let serve = serve_settings(Some(&settings.0)).unwrap();
        assert_eq!(
            origin(&serve, "metrics_token"),
            (Some("***".into()), Origin::File)
        );
        assert_eq!(origin(&serve, "workers"), (None, Origin::Unset));
    }

    /// The example file names every global setting and every setting of `serve`, `backup` and
    /// `restore`, and nothing else, so the two cannot drift apart; and what it sets loads.
    #[test]
    fn the_example_file_lists_every_setting() {
        let example = include_str!("../../../contrib/mercer.example.toml");
        let mut section = String::new();
        let mut found: BTreeSet<(String, String)> = BTreeSet::new();
        for line in example.lines() {
            let line = line.trim_start_matches('#').trim();
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                section = name.to_string();
            } else if let Some((key, _)) = line.split_once(" = ")
                && !key.contains(' ')
            {
                found.insert((section.clone(), key.to_string()));
            }
        }
        let top = Cli::command();
        let mut expected: BTreeSet<(String, String)> = settable(&top, true)
            .into_iter()
            .filter_map(|arg| key_of(arg).map(|key| (String::new(), key)))
            .collect();
        for table in ["serve", "backup", "restore"] {
            let command = top.find_subcommand(table).unwrap();
            expected.extend(
                settable(command, false)
                    .into_iter()
                    .filter_map(|arg| key_of(arg).map(|key| (table.to_string(), key))),
            );
        }
        assert_eq!(
            found, expected,
            "contrib/mercer.example.toml and the flags differ"
        );
        let settings = file(example);
        let config = format!("--config={}", settings.0.display());
        load(["mercer", &config, "serve"]).expect("the example loads");
    }
}
