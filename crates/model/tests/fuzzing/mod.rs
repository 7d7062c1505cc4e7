//! The fuzz harness of every parser that reads outside input (keys, values, selectors, BIRD's
//! output, CNI's stdin and environment, Felix's config): each `fuzz.rs` test includes this file
//! (`#[path]`: it has no crate of its own, and uses only std so that crates without a fuzzing
//! dependency can include it too).
//!
//! Inputs are a mix of arbitrary bytes and structure-aware ones: valid seeds (real keys, JSON
//! values, selectors, configs, `birdc` output) mutated by byte flips, insertions, deletions,
//! repeats (deep nesting, long runs), splices of two seeds, dictionary tokens and boundary
//! numbers, so inputs get past the first checks and into the parser's depths.
//!
//! Each input must: not panic, return within [`HANG`] (anything slower counts as a hang), and
//! pass the target's own check (typically: an error names a field, key or position; an accepted
//! input round-trips). Failures print the input and how to reproduce it.
//!
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `CALICO_FUZZ_CASES` | inputs per parser | 20,000 (CI, debug: seconds); `scripts/fuzz.sh` runs 1,000,000 in release |
//! | `CALICO_FUZZ_SEED` | the run's random seed (each parser derives its own) | fixed, so CI is deterministic |

#![allow(dead_code, reason = "each fuzz test uses a part of the harness")]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// An input slower than this (twice: a slow one is timed again) is a hang.
pub const HANG: Duration = Duration::from_secs(1);

const DEFAULT_CASES: u64 = 20_000;
const DEFAULT_SEED: u64 = 0xca11_c0f0_22ed_5eed;

/// What a target's check made of one input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Accepted,
    Rejected,
}

/// A parser under fuzz: its seeds and the tokens its grammar is made of.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub name: &'a str,
    pub seeds: &'a [&'a [u8]],
    pub tokens: &'a [&'a [u8]],
}

/// splitmix64: small, fast, and good enough to drive mutations.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True one time in `n`.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// One of `items` (byte strings: seeds, tokens).
    pub fn bytes<'a>(&mut self, items: &[&'a [u8]]) -> &'a [u8] {
        items[self.below(items.len())]
    }
}

/// Numbers at the edges of the types parsers convert to.
pub const BOUNDARY_NUMBERS: &[&[u8]] = &[
    b"0",
    b"-1",
    b"1",
    b"255",
    b"256",
    b"65535",
    b"65536",
    b"4294967295",
    b"4294967296",
    b"18446744073709551615",
    b"18446744073709551616",
    b"-9223372036854775809",
    b"1e308",
    b"1e-320",
    b"-0",
    b"NaN",
    b"inf",
    b"0x",
    b"99999999999999999999999999999999",
];

/// Bytes that break parsers: quotes, escapes, separators, non-ASCII and invalid UTF-8.
pub const NASTY: &[&[u8]] = &[
    b"\"",
    b"'",
    b"\\",
    b"\\u0000",
    b"\\ud800",
    b"\0",
    b"\n",
    b"\r\n",
    b"\t",
    b" ",
    b"/",
    b"//",
    b"%",
    b"=",
    b";",
    b",",
    b":",
    b"{",
    b"}",
    b"[",
    b"]",
    b"null",
    b"\xc3\xa9",
    b"\xe2\x80\xa8",
    b"\xf0\x9f\x92\xa9",
    b"\xff\xfe",
    b"\xc0",
    b"\xe3\x80\x80",
];

/// One input for `target`: arbitrary bytes one time in four, else a mutated seed.
pub fn input(rng: &mut Rng, target: &Target<'_>) -> Vec<u8> {
    if target.seeds.is_empty() || rng.one_in(4) {
        return arbitrary(rng);
    }
    let mut data = rng.bytes(target.seeds).to_vec();
    let most = if rng.one_in(4) { 16 } else { 4 };
    let rounds = 1 + rng.below(most);
    for _ in 0..rounds {
        mutate(rng, &mut data, target);
    }
    data
}

/// Random bytes: any byte, or printable ASCII (which gets further into text parsers).
fn arbitrary(rng: &mut Rng) -> Vec<u8> {
    let longest = if rng.one_in(8) { 4096 } else { 64 };
    let len = rng.below(longest);
    let printable = rng.one_in(2);
    (0..len)
        .map(|_| match printable {
            true => b' ' + rng.below(95) as u8,
            false => rng.next_u64() as u8,
        })
        .collect()
}

fn mutate(rng: &mut Rng, data: &mut Vec<u8>, target: &Target<'_>) {
    let at = rng.below(data.len() + 1);
    match rng.below(10) {
        0 if !data.is_empty() => {
            let i = rng.below(data.len());
            data[i] ^= 1 << rng.below(8);
        }
        1 => data.insert(at, rng.next_u64() as u8),
        2 if at < data.len() => {
            let len = 1 + rng.below((data.len() - at).min(16));
            data.drain(at..at + len);
        }
        3 if !target.tokens.is_empty() => splice_in(data, at, rng.bytes(target.tokens)),
        4 => splice_in(data, at, rng.bytes(BOUNDARY_NUMBERS)),
        5 => splice_in(data, at, rng.bytes(NASTY)),
        6 => replace_number(rng, data),
        7 if at < data.len() => {
            // A run repeated: long names, deep nesting, many elements.
            let len = 1 + rng.below((data.len() - at).min(8));
            let times = if rng.one_in(8) {
                2_000
            } else {
                1 + rng.below(16)
            };
            let run = data[at..at + len].repeat(times);
            splice_in(data, at, &run);
        }
        8 if !target.seeds.is_empty() => {
            // The head of this input on the tail of another seed.
            let other = rng.bytes(target.seeds);
            let from = rng.below(other.len() + 1);
            data.truncate(at);
            data.extend_from_slice(&other[from..]);
        }
        _ => data.truncate(at),
    }
}

fn splice_in(data: &mut Vec<u8>, at: usize, bytes: &[u8]) {
    data.splice(at..at, bytes.iter().copied());
}

/// Replaces one run of digits with a boundary number.
fn replace_number(rng: &mut Rng, data: &mut Vec<u8>) {
    let starts: Vec<usize> = (0..data.len())
        .filter(|&i| data[i].is_ascii_digit() && (i == 0 || !data[i - 1].is_ascii_digit()))
        .collect();
    if starts.is_empty() {
        return;
    }
    let start = *rng.pick(&starts);
    let end = (start..data.len())
        .find(|&i| !data[i].is_ascii_digit())
        .unwrap_or(data.len());
    let number = rng.bytes(BOUNDARY_NUMBERS);
    data.splice(start..end, number.iter().copied());
}

/// How many inputs per parser.
pub fn cases() -> u64 {
    env_number("CALICO_FUZZ_CASES").unwrap_or(DEFAULT_CASES)
}

fn env_number(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    let text = text.replace('_', "");
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    Some(parsed.unwrap_or_else(|e| panic!("{name}={text:?}: not a number: {e}")))
}

/// The seed of one parser's run: the run's seed mixed with the parser's name.
fn target_seed(name: &str) -> u64 {
    let run = env_number("CALICO_FUZZ_SEED").unwrap_or(DEFAULT_SEED);
    name.bytes()
        .fold(run, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// Fuzzes one parser: `make` turns the random source into an input (usually [`input`]),
/// `check` runs the parser on it. Panics (failing the test) on the first input that panics,
/// hangs or fails its check, printing it; prints the counts and the time at the end.
pub fn run<I: std::fmt::Debug>(
    name: &str,
    mut make: impl FnMut(&mut Rng) -> I,
    mut check: impl FnMut(&I) -> Result<Verdict, String>,
) {
    let seed = target_seed(name);
    let mut rng = Rng::new(seed);
    let cases = cases();
    let (mut accepted, mut slowest) = (0u64, Duration::ZERO);
    let watchdog = Watchdog::start(name, seed);
    let started = Instant::now();
    for case in 0..cases {
        let input = make(&mut rng);
        let at = Instant::now();
        watchdog.case(case);
        let outcome = catch_unwind(AssertUnwindSafe(|| check(&input)));
        let mut took = at.elapsed();
        if took > HANG && matches!(outcome, Ok(Ok(_))) {
            // Timed once more, so that a busy machine's pause is not taken for a hang.
            let again = Instant::now();
            let _ = catch_unwind(AssertUnwindSafe(|| check(&input)));
            took = took.min(again.elapsed());
        }
        watchdog.case(u64::MAX);
        slowest = slowest.max(took);
        let failure = match outcome {
            Ok(Ok(verdict)) if took <= HANG => {
                accepted += u64::from(verdict == Verdict::Accepted);
                continue;
            }
            Ok(Ok(_)) => format!("hang: took {took:?} (more than {HANG:?})"),
            Ok(Err(violation)) => violation,
            Err(panic) => format!("panic: {}", panic_text(&panic)),
        };
        panic!(
            "fuzz {name}: case {case} of the run seeded {seed:#x} failed: {failure}\ninput: {}\n\
             (reproduce: CALICO_FUZZ_SEED as this run's, CALICO_FUZZ_CASES={})",
            shown(&input),
            case + 1
        );
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "fuzz {name}: {cases} inputs, {accepted} accepted, {} rejected, 0 panics, 0 hangs, \
         {secs:.1} s ({:.0} inputs/s), slowest {:.2} ms",
        cases - accepted,
        cases as f64 / secs.max(1e-9),
        slowest.as_secs_f64() * 1e3
    );
}

/// Catches an input that never returns (a [`HANG`] check after the call cannot): after
/// 10 × `HANG` on one input it prints which case it is and aborts the test process.
struct Watchdog {
    /// The case running (`u64::MAX`: none), and since when.
    running: Arc<(AtomicU64, Mutex<Instant>)>,
    done: Arc<AtomicBool>,
}

impl Watchdog {
    fn start(name: &str, seed: u64) -> Watchdog {
        let running = Arc::new((AtomicU64::new(u64::MAX), Mutex::new(Instant::now())));
        let done = Arc::new(AtomicBool::new(false));
        let (watched, finished, name) = (running.clone(), done.clone(), name.to_owned());
        std::thread::spawn(move || {
            while !finished.load(Ordering::Relaxed) {
                std::thread::park_timeout(Duration::from_millis(100));
                let case = watched.0.load(Ordering::Relaxed);
                let since = *watched.1.lock().unwrap_or_else(|e| e.into_inner());
                if case != u64::MAX && since.elapsed() > 10 * HANG {
                    eprintln!(
                        "fuzz {name}: case {case} of the run seeded {seed:#x} has not returned \
                         after {:?}: a hang (reproduce: CALICO_FUZZ_CASES={})",
                        since.elapsed(),
                        case + 1
                    );
                    std::process::abort();
                }
            }
        });
        Watchdog { running, done }
    }

    fn case(&self, case: u64) {
        if case != u64::MAX {
            *self.running.1.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        }
        self.running.0.store(case, Ordering::Relaxed);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "(not a string)".to_owned())
}

/// The input as debug text, its middle cut when long.
fn shown(input: &impl std::fmt::Debug) -> String {
    let text = format!("{input:?}");
    if text.len() <= 4_000 {
        return text;
    }
    let cut = |i: usize| {
        (0..=i)
            .rev()
            .find(|&j| text.is_char_boundary(j))
            .unwrap_or(0)
    };
    let (head, tail) = (cut(2_000), cut(text.len() - 2_000));
    format!(
        "{} … ({} bytes) … {}",
        &text[..head],
        text.len(),
        &text[tail..]
    )
}

/// Text for a text parser: the bytes as UTF-8, invalid sequences replaced (what a reader of
/// etcd or a file does with bytes it decodes lossily; strict decoders refuse earlier).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Fails the check unless `condition`, with `what` as the violation.
pub fn ensure(condition: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if condition { Ok(()) } else { Err(what()) }
}
