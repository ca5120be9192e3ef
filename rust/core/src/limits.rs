//! Fixed bounds of the engine: not options, but sizes several modules must agree on.

/// The most messages a loop keeps requested; must fit the subscription buffer.
pub const MAX_BUFFERED_MESSAGES: usize = 131_072;

/// Messages one subscription may buffer: above every bound the engine requests.
pub const SUBSCRIPTION_CAPACITY: usize = 4 * MAX_BUFFERED_MESSAGES;
