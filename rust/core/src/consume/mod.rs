//! Consuming through consumers: the pull loop every pull consumer and read runs on
//! ([`pull`]), durable pull consumers and their acks ([`durable`]), push consumers
//! ([`push`]) with flow-control acking ([`flow_control`]), and the resync that puts a
//! push consumer back where it stopped ([`resync`]).

pub mod durable;
pub mod flow_control;
pub mod pull;
pub mod push;
pub mod resync;
