//! Consuming through consumers: the pull loop every pull consumer and read runs on
//! ([`pull`]), durable pull consumers ([`durable`]), the batches consumers hand out
//! and their acks ([`batch`]), what a binding that acknowledges cumulatively handed
//! out and acknowledged ([`ledger`]), push consumers
//! ([`push`]) with flow-control acking ([`flow_control`]), and the resync that puts a
//! push consumer back where it stopped ([`resync`]).

pub mod batch;
pub mod durable;
pub mod flow_control;
pub mod ledger;
pub mod pull;
pub mod push;
pub mod resync;
