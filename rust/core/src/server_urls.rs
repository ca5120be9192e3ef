//! Server URLs: the credentials a URL may carry, and the form of the servers that
//! messages and `repr`s show (without them).

use crate::error::{Error, Result};

/// `servers` with the user info of every URL (`user:password@`, `token@`) shown as
/// `***@`: the form of the servers for messages and `repr`s.
pub fn redact_servers(servers: &str) -> String {
    servers
        .split(',')
        .map(redact_url)
        .collect::<Vec<_>>()
        .join(",")
}

pub(crate) fn redact_url(url: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    match url[start..end].rfind('@') {
        Some(at) => format!("{}***{}", &url[..start], &url[start + at..]),
        None => url.to_string(),
    }
}

/// Credentials in server URLs, read as other NATS clients read them:
/// `nats://user:password@host` or `nats://token@host`. async-nats ignores them, so
/// they are passed on as options.
#[derive(Debug, PartialEq)]
pub(crate) enum UrlCredentials {
    UserPassword(String, String),
    Token(String),
}

pub(crate) fn url_credentials(
    servers: &[async_nats::ServerAddr],
) -> Result<Option<UrlCredentials>> {
    let mut found: Option<(String, Option<String>)> = None;
    for server in servers {
        let Some(user) = server.username() else {
            continue;
        };
        let this = (
            percent_decode(user)?,
            server.password().map(percent_decode).transpose()?,
        );
        // One connection has one set of credentials: URLs must not disagree.
        if found.as_ref().is_some_and(|seen| *seen != this) {
            return Err(Error::bad_input(
                "the URLs of option 'servers' carry different credentials; give the same \
                 in each, or use options 'user' and 'password' or 'token'",
            ));
        }
        found = Some(this);
    }
    Ok(found.map(|(user, password)| match password {
        Some(password) => UrlCredentials::UserPassword(user, password),
        None => UrlCredentials::Token(user),
    }))
}

/// Undo the percent-encoding of a URL's user info (`p%40ss` is `p@ss`).
fn percent_decode(text: &str) -> Result<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    // The message names no value: user info holds secrets.
    String::from_utf8(out).map_err(|_| {
        Error::bad_input("option 'servers': a URL's user info is not UTF-8 once decoded")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(servers: &str) -> Vec<async_nats::ServerAddr> {
        servers.split(',').map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn user_info_is_redacted_from_every_url() {
        assert_eq!(
            redact_servers("nats://a:pw@h1:4222, tls://tok@h2,h3:4222,u:p@h4/x@y"),
            "nats://***@h1:4222, tls://***@h2,h3:4222,***@h4/x@y"
        );
        assert_eq!(redact_servers("nats://h:4222"), "nats://h:4222");
    }

    #[test]
    fn credentials_come_from_the_urls() {
        assert_eq!(
            url_credentials(&addrs("nats://a:p%40ss@h1,nats://h2")).unwrap(),
            Some(UrlCredentials::UserPassword("a".into(), "p@ss".into()))
        );
        assert_eq!(
            url_credentials(&addrs("nats://tok@h1")).unwrap(),
            Some(UrlCredentials::Token("tok".into()))
        );
        assert_eq!(url_credentials(&addrs("nats://h1")).unwrap(), None);
        let err = url_credentials(&addrs("nats://a:secret1@h1,nats://a:secret2@h2")).unwrap_err();
        assert!(!err.to_string().contains("secret"), "{err}");
    }
}
