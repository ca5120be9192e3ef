//! Messages as Arrow: the one message schema ([`schema`]), the columns a batch is
//! built in ([`builder`]), and what a message's reply subject says about it
//! ([`metadata`]).

pub mod builder;
pub mod metadata;
pub mod schema;
