//! A base URL: `http(s)://HOST[:PORT][/prefix]`, the port filled in from the scheme.

/// A parsed base URL.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Endpoint {
    https: bool,
    /// `HOST:PORT` (`[v6]:PORT`).
    authority: String,
    host: String,
    /// Without a trailing `/`; empty for none.
    prefix: String,
}

const EXPECTED: &str = "expected http://HOST:PORT or https://HOST:PORT";

impl Endpoint {
    /// Parses `url`, or says what is wrong with it.
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        let (https, rest) = match url.split_once("://") {
            Some(("http", rest)) => (false, rest),
            Some(("https", rest)) => (true, rest),
            _ => return Err(EXPECTED.into()),
        };
        let (authority, prefix) = match rest.find('/') {
            Some(at) => (&rest[..at], rest[at..].trim_end_matches('/')),
            None => (rest, ""),
        };
        if authority.is_empty() || authority.contains(['?', '#', '@', ' ']) {
            return Err(EXPECTED.into());
        }
        if prefix.contains(['?', '#', ' ']) {
            return Err("the path may not have a query, a fragment or blanks".into());
        }
        let (host, port) = split_host(authority)?;
        let port = match port {
            Some(port) => port,
            None if https => 443,
            None => 80,
        };
        let authority = match host.contains(':') {
            true => format!("[{host}]:{port}"),
            false => format!("{host}:{port}"),
        };
        Ok(Endpoint {
            https,
            authority,
            host,
            prefix: prefix.to_owned(),
        })
    }

    /// The URL of `path` (which starts with `/`) on this endpoint.
    pub fn url(&self, path: &str) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}{}{path}", self.authority, self.prefix)
    }

    pub fn is_https(&self) -> bool {
        self.https
    }

    /// The base URL itself, as it is used (port filled in, no trailing `/`).
    pub fn base(&self) -> String {
        self.url("")
    }

    /// A copy with `suffix` appended to the path prefix.
    pub fn join(&self, suffix: &str) -> Endpoint {
        Endpoint {
            prefix: format!("{}{suffix}", self.prefix),
            ..self.clone()
        }
    }

    /// The path prefix (`/v3`), empty for none.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `HOST:PORT`, as the `Host` header and a TCP connect take it.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// The host alone, as a TLS server name.
    pub fn host(&self) -> &str {
        &self.host
    }
}

/// `host` or `host:port` or `[v6]` or `[v6]:port`.
fn split_host(authority: &str) -> Result<(String, Option<u16>), String> {
    let bad_port = |port: &str| format!("port {port:?}: not a number from 1 to 65535");
    let parse_port = |port: &str| match port.parse::<u16>() {
        Ok(0) | Err(_) => Err(bad_port(port)),
        Ok(port) => Ok(Some(port)),
    };
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or("an IPv6 address must be closed with ']'")?;
        return match after.strip_prefix(':') {
            Some(port) => Ok((host.to_owned(), parse_port(port)?)),
            None if after.is_empty() => Ok((host.to_owned(), None)),
            None => Err(format!("{after:?} after the address")),
        };
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && !host.contains(':') => {
            Ok((host.to_owned(), parse_port(port)?))
        }
        Some(_) => Err("an IPv6 address must be in brackets: [ADDRESS]:PORT".into()),
        None => Ok((authority.to_owned(), None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_parsed_with_their_port_and_prefix() {
        let e = Endpoint::parse("http://127.0.0.1:9696/").unwrap();
        assert_eq!(e.base(), "http://127.0.0.1:9696");
        assert_eq!(e.url("/v2.0/ports"), "http://127.0.0.1:9696/v2.0/ports");
        let e = Endpoint::parse("https://keystone.example/identity/v3").unwrap();
        assert_eq!(e.base(), "https://keystone.example:443/identity/v3");
        assert_eq!((e.prefix(), e.host()), ("/identity/v3", "keystone.example"));
        assert!(e.is_https());
        let e = Endpoint::parse("http://[fd00::1]:5000").unwrap();
        assert_eq!(e.url("/v3"), "http://[fd00::1]:5000/v3");
        assert_eq!(e.join("/v3").base(), "http://[fd00::1]:5000/v3");
        assert_eq!(e.authority(), "[fd00::1]:5000");
    }

    #[test]
    fn bad_urls_say_why() {
        for (url, reason) in [
            ("127.0.0.1:9696", EXPECTED),
            ("ftp://a:1", EXPECTED),
            ("http://a:x", "port \"x\""),
            ("http://a:0", "port \"0\""),
            ("http://fd00::1:5000", "in brackets"),
            ("http://a:1/v3?x=1", "query"),
            ("http://", EXPECTED),
        ] {
            let error = Endpoint::parse(url).unwrap_err();
            assert!(error.contains(reason), "{url}: {error}");
        }
    }
}
