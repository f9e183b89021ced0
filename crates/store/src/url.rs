//! The database URL, and the backend it names. The backend is picked from the scheme, never by
//! trying to connect: SQLite would accept any string as a file name.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

#[derive(Clone, PartialEq, Eq)]
pub enum DatabaseUrl {
    /// `sqlite://PATH`: a file path, relative to the working directory unless it starts with `/`.
    Sqlite { path: String },
    /// `postgres://…` or `postgresql://…`, handed to libpq as written.
    Postgres { url: String },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("unsupported database URL: it must start with sqlite:// or postgres://")]
    UnsupportedScheme,
    #[error("the sqlite:// URL names no file")]
    MissingPath,
    #[error(
        "in-memory SQLite is not supported: every pooled connection would see its own database"
    )]
    InMemory,
}

impl DatabaseUrl {
    pub fn parse(text: &str) -> Result<Self, UrlError> {
        let text = text.trim();
        if let Some(path) = text.strip_prefix("sqlite://") {
            if path.is_empty() {
                return Err(UrlError::MissingPath);
            }
            if path == ":memory:" || path.contains("mode=memory") {
                return Err(UrlError::InMemory);
            }
            return Ok(DatabaseUrl::Sqlite {
                path: path.to_string(),
            });
        }
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            return Ok(DatabaseUrl::Postgres {
                url: text.to_string(),
            });
        }
        Err(UrlError::UnsupportedScheme)
    }

    pub fn backend(&self) -> Backend {
        match self {
            DatabaseUrl::Sqlite { .. } => Backend::Sqlite,
            DatabaseUrl::Postgres { .. } => Backend::Postgres,
        }
    }

    /// The URL with any password replaced by `***`, for logs and messages.
    pub fn redacted(&self) -> String {
        match self {
            DatabaseUrl::Sqlite { path } => format!("sqlite://{path}"),
            DatabaseUrl::Postgres { url } => redact_password(url),
        }
    }
}

fn redact_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return url.to_string();
    };
    match userinfo.split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***@{host}{tail}"),
        None => url.to_string(),
    }
}

/// Debug shows the redacted form, so a URL in a logged struct never leaks its password.
impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_backend_from_the_scheme() {
        assert_eq!(
            DatabaseUrl::parse("sqlite://mercer.db"),
            Ok(DatabaseUrl::Sqlite {
                path: "mercer.db".into()
            })
        );
        assert_eq!(
            DatabaseUrl::parse("sqlite:///var/lib/mercer.db").map(|u| u.backend()),
            Ok(Backend::Sqlite)
        );
        assert_eq!(
            DatabaseUrl::parse("postgres://u@h/db").map(|u| u.backend()),
            Ok(Backend::Postgres)
        );
        assert_eq!(
            DatabaseUrl::parse("postgresql://u@h/db").map(|u| u.backend()),
            Ok(Backend::Postgres)
        );
        assert_eq!(
            DatabaseUrl::parse("mysql://u@h/db"),
            Err(UrlError::UnsupportedScheme)
        );
        assert_eq!(
            DatabaseUrl::parse("mercer.db"),
            Err(UrlError::UnsupportedScheme)
        );
        assert_eq!(DatabaseUrl::parse("sqlite://"), Err(UrlError::MissingPath));
        assert_eq!(
            DatabaseUrl::parse("sqlite://:memory:"),
            Err(UrlError::InMemory)
        );
    }

    #[test]
    fn redacts_passwords() {
        let url =
            DatabaseUrl::parse("postgres://mercer:s3cret@db.internal:5432/mercer?sslmode=require")
                .unwrap();
        assert_eq!(
            url.redacted(),
            "postgres://mercer:***@db.internal:5432/mercer?sslmode=require"
        );
        assert!(!format!("{url:?}").contains("s3cret"));
        let no_password = DatabaseUrl::parse("postgres://root@127.0.0.1/db").unwrap();
        assert_eq!(no_password.redacted(), "postgres://root@127.0.0.1/db");
    }
}
