//! Fixed bounds of the engine: not options, but sizes several modules must agree on.

/// The most messages a loop keeps requested; must fit the subscription buffer.
pub const MAX_BUFFERED_MESSAGES: usize = 131_072;

/// Messages one subscription may buffer: above every bound the engine requests.
pub const SUBSCRIPTION_CAPACITY: usize = 4 * MAX_BUFFERED_MESSAGES;

/// The longest duration an option takes, in seconds (about 31 years): every timeout
/// is added to the present, and a clock instant ends some 292 years on, so a larger
/// value would overflow the deadline instead of waiting.
pub const MAX_SECONDS: f64 = 1e9;

/// The shortest duration an option that must be more than nothing takes (a
/// timeout, a delay between tries): one nanosecond, the least a `Duration` holds; a
/// smaller value would round to no time at all.
pub const MIN_SECONDS: f64 = 1e-9;
