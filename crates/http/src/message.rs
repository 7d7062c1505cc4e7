//! A request and its answer, as the callers build and read them.

/// One request: a method, the path (and query) from `/`, headers and a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The path and query, starting with `/` (an endpoint's prefix goes before it).
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn new(method: &str, path: &str) -> Request {
        Request {
            method: method.to_owned(),
            path: path.to_owned(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    pub fn get(path: &str) -> Request {
        Request::new("GET", path)
    }

    /// With one more header.
    pub fn header(mut self, name: &str, value: &str) -> Request {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// With a JSON body (and its content type).
    pub fn json(self, body: String) -> Request {
        let mut request = self.header("content-type", "application/json");
        request.body = body.into_bytes();
        request
    }

    /// Whether sending it twice does no harm (a stale kept connection is retried once).
    pub(crate) fn is_idempotent(&self) -> bool {
        matches!(self.method.as_str(), "GET" | "HEAD")
    }
}

/// An answer: the status, the headers, the body as text (lossy UTF-8).
#[derive(Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// Names in lowercase.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// A 2xx status.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// Header values can be credentials (Keystone's `X-Subject-Token`): only their names are shown.
impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Response")
            .field("status", &self.status)
            .field("headers", &names)
            .field("body", &self.body)
            .finish()
    }
}
