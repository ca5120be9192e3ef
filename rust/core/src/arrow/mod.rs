//! Messages as Arrow: the one message schema ([`schema`]), the columns a batch is
//! built in ([`builder`]), its `data` column copied or viewed ([`payloads`]), what a
//! message's reply subject says about it ([`metadata`]), and what its `Nats-TTL` means
//! to the server ([`ttl`]).

pub mod builder;
pub mod metadata;
pub mod payloads;
pub mod schema;
pub mod ttl;
