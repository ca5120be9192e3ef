//! The fast-ingest publish limit: one fast batch (nats-server 2.14+, a stream with
//! `allow_batched`) written over one raw TCP socket, the NATS protocol spoken by hand.
//!
//! Every message is a `PUB <subject> <reply> <len>` whose reply subject carries the batch
//! state, `<inbox>.<flow>.fail.<seq>.<op>.$FI` (op 0 starts the batch, 1 appends, 3 ends
//! it without storing the message); the server answers on the inbox with a flow ack
//! (`{"type":"ack","seq":N,"msgs":F}`) every F messages and with the batch's PubAck at the
//! end. Frames are appended to one buffer and written when it fills (64 KiB) or when the client
//! has to wait for an ack; the socket is read only then (and without blocking after each
//! write), so the client does next to nothing per message. The bounds are the package's:
//! the flow asked for is [`defaults::FAST_FLOW`] at most, at most
//! [`defaults::FAST_OUTSTANDING_ACKS`] acks' worth in flight, within the window and
//! [`MAX_BYTES_IN_FLIGHT`].

use std::io::{ErrorKind, Write};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use jetstream_arrow_core::defaults;
use jetstream_arrow_core::defaults::MAX_BYTES_IN_FLIGHT;
use serde_json::{json, Value};

use crate::raw::{Conn, Frame, Stop};
use crate::{Args, Error};

const SID_REPLIES: u64 = 1;
/// Frames are written once this many bytes are buffered.
const WRITE_CHUNK: usize = 64 << 10;
const OP_START: u8 = 0;
const OP_APPEND: u8 = 1;
const OP_COMMIT_EOB: u8 = 3;

/// The package's flow for these bounds (`publish/fast.rs`, `requested_flow`).
fn requested_flow(window: u64, size: usize) -> u64 {
    let outstanding = defaults::FAST_OUTSTANDING_ACKS;
    let by_window = window / outstanding;
    let by_bytes =
        (MAX_BYTES_IN_FLIGHT as u64 / (outstanding * size.max(1) as u64)).saturating_sub(1);
    u64::from(defaults::FAST_FLOW)
        .min(by_window)
        .min(by_bytes)
        .max(1)
}

struct Batch {
    subject: String,
    /// `<inbox>.<flow>.fail.`
    reply_prefix: String,
    out: Vec<u8>,
    sent: u64,
    acked: u64,
    flow: u64,
    flow_acks: u64,
    writes: u64,
    /// The batch's PubAck, once it came.
    pub_ack: Option<Value>,
}

impl Batch {
    /// Appends one message's frame to the write buffer.
    fn push(&mut self, seq: u64, op: u8, payload: &[u8]) {
        let out = &mut self.out;
        out.extend_from_slice(b"PUB ");
        out.extend_from_slice(self.subject.as_bytes());
        out.push(b' ');
        out.extend_from_slice(self.reply_prefix.as_bytes());
        let _ = write!(out, "{seq}.{op}.$FI {}\r\n", payload.len());
        out.extend_from_slice(payload);
        out.extend_from_slice(b"\r\n");
    }

    fn flush(&mut self, conn: &mut Conn) -> Result<(), Stop> {
        if !self.out.is_empty() {
            conn.send(&self.out)?;
            self.out.clear();
            self.writes += 1;
        }
        Ok(())
    }

    /// One reply of the batch: a flow ack moves `acked`, the PubAck ends the batch; a
    /// gap, an error or a status is the run's failure.
    fn on_reply(&mut self, conn: &mut Conn, m: &crate::raw::Msg) -> Result<(), Stop> {
        if let Some(code) = conn.status(m)? {
            let text = String::from_utf8_lossy(conn.status_text(m)?).into_owned();
            return Err(Stop::Protocol(format!(
                "fast batch reply: status {code} {text}"
            )));
        }
        conn.need(m.total + 2)?;
        let body = &conn.buf[conn.start + m.hdr..conn.start + m.total];
        let reply: Value = serde_json::from_slice(body)
            .map_err(|e| Stop::Protocol(format!("fast batch reply is not JSON: {e}")))?;
        conn.skip(m.total + 2)?;
        conn.progress += 1;
        match reply["type"].as_str() {
            Some("ack") => {
                self.flow_acks += 1;
                self.acked = self.acked.max(reply["seq"].as_u64().unwrap_or(0));
                if let Some(msgs) = reply["msgs"].as_u64().filter(|&m| m > 0) {
                    self.flow = msgs;
                }
                Ok(())
            }
            _ if reply.get("error").is_none() && reply.get("batch").is_some() => {
                self.pub_ack = Some(reply);
                Ok(())
            }
            _ => Err(Stop::Protocol(format!("fast batch failed: {reply}"))),
        }
    }

    /// The next frame on the reply subscription (others are skipped), handled.
    fn read_reply(&mut self, conn: &mut Conn) -> Result<(), Stop> {
        loop {
            let Frame::Msg(m) = conn.frame()? else {
                continue;
            };
            if m.sid != SID_REPLIES {
                conn.skip(m.total + 2)?;
                continue;
            }
            return self.on_reply(conn, &m);
        }
    }

    /// Whatever replies the socket already holds, without waiting.
    fn read_ready(&mut self, conn: &mut Conn) -> Result<(), Stop> {
        conn.sock.set_nonblocking(true)?;
        let mut probe = [0u8; 1];
        let ready = match conn.sock.peek(&mut probe) {
            Ok(0) => Err(Stop::Closed),
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(false),
            Err(e) => Err(Stop::Io(e)),
        };
        conn.sock.set_nonblocking(false)?;
        if ready? {
            // What arrived is read in one go and the replies in it handled; a reply
            // whose control line came whole is completed by blocking reads (the rest is
            // on its way), a partial line waits for the next read.
            conn.fill_once()?;
            while let Some(frame) = conn.frame_ready()? {
                if let Frame::Msg(m) = frame {
                    if m.sid == SID_REPLIES {
                        self.on_reply(conn, &m)?;
                    } else {
                        conn.skip(m.total + 2)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn has_room(&self, window: u64) -> bool {
        let in_flight = self.sent - self.acked;
        in_flight < self.flow * defaults::FAST_OUTSTANDING_ACKS && in_flight < window
    }
}

/// `raw-publish-fast`: `count` messages of `size` bytes in one fast batch, then its end.
pub fn publish_fast(args: &Args) -> Result<Value, Error> {
    let url = args.str("url")?;
    let subject = args.str("subject")?;
    let count = args.num("count", None)?;
    let size = args.num("size", None)? as usize;
    let window = args.num("window", Some(defaults::WINDOW as u64))?.max(1);
    if subject.contains([' ', '\t', '\r', '\n']) || subject.is_empty() {
        return Err(format!("bad subject {subject:?}").into());
    }

    let mut conn = Conn::connect(&url)?;
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let inbox = format!("_INBOX.{:x}{:x}", std::process::id(), nanos);
    let requested = requested_flow(window, size);
    let mut b = Batch {
        subject,
        reply_prefix: format!("{inbox}.{requested}.fail."),
        out: Vec::with_capacity(WRITE_CHUNK + size + 256),
        sent: 0,
        acked: 0,
        flow: requested,
        flow_acks: 0,
        writes: 0,
        pub_ack: None,
    };
    conn.send(format!("SUB {inbox}.> {SID_REPLIES}\r\nPING\r\n").as_bytes())
        .map_err(|s| s.waiting_for(|| "the subscription".into()))?;
    loop {
        match conn.frame() {
            Ok(Frame::Pong) => break,
            Ok(Frame::Msg(m)) => conn
                .skip(m.total + 2)
                .map_err(|s| s.waiting_for(|| "the PONG after SUB".into()))?,
            Err(s) => return Err(s.waiting_for(|| "the PONG after SUB".into())),
        }
    }
    let payload = vec![b'x'; size];

    let started = Instant::now();
    conn.restart_clock();
    let sending = (|| -> Result<(), Stop> {
        // The first message, alone: its reply says the stream takes fast batches.
        b.push(1, OP_START, &payload);
        b.sent = 1;
        b.flush(&mut conn)?;
        b.read_reply(&mut conn)?;
        if b.pub_ack.is_some() {
            return Err(Stop::Protocol(
                "the first message was answered as a plain publish (no fast batch)".into(),
            ));
        }
        while b.sent < count {
            if b.has_room(window) {
                b.sent += 1;
                b.push(b.sent, OP_APPEND, &payload);
                if b.out.len() >= WRITE_CHUNK {
                    b.flush(&mut conn)?;
                    b.read_ready(&mut conn)?;
                }
            } else {
                b.flush(&mut conn)?;
                b.read_reply(&mut conn)?;
            }
        }
        b.push(b.sent + 1, OP_COMMIT_EOB, &[]);
        b.flush(&mut conn)?;
        while b.pub_ack.is_none() {
            b.read_reply(&mut conn)?;
        }
        Ok(())
    })();
    sending.map_err(|s| {
        s.waiting_for(|| {
            format!(
                "fast batch replies ({} of {count} sent, {} acknowledged)",
                b.sent, b.acked
            )
        })
    })?;
    let seconds = started.elapsed().as_secs_f64();
    let pub_ack = b.pub_ack.take().unwrap_or(Value::Null);
    let stored = pub_ack["count"].as_u64().unwrap_or(0);
    if stored != count {
        return Err(
            format!("the batch's PubAck says {stored} of {count} stored: {pub_ack}").into(),
        );
    }
    Ok(json!({
        "op": "raw-publish-fast",
        "msgs": stored,
        "bytes": stored * size as u64,
        "seconds": seconds,
        "flow_requested": requested,
        "flow": b.flow,
        "flow_acks": b.flow_acks,
        "ack_messages_per_1000": b.flow_acks as f64 * 1000.0 / stored.max(1) as f64,
        "writes": b.writes,
    }))
}
