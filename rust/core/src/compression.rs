//! Payload compression: the one home of the algorithms, the header that marks a
//! compressed message and the bound on what a payload may decompress to.
//!
//! A publish with `compression` compresses each payload after the codec encoded it
//! (or the `data` column as given) and marks the message `Content-Encoding: <name>`;
//! every read decompresses a message by its own header before a codec decodes it, so
//! a stream may mix compressed and plain messages, and a reader needs no option.
//!
//! The header is HTTP's (`Content-Encoding`, RFC 9110), with the algorithm's name as
//! its value (`zstd`, `gzip`, `zlib`, `s2`; `deflate`, HTTP's name for the zlib
//! format, is read as `zlib`). NATS has no convention of its own: the NATS Spark
//! connector's `nats.storage.payload-compression=zlib` is a reader's setting that
//! inflates every payload of the stream (`java.util.zip.Inflater`, the zlib format of
//! RFC 1950) and marks nothing, so it reads this package's `zlib` payloads as they
//! are (the header is one it ignores). Here a message without the header is plain.
//!
//! Memory is bounded: a payload is decompressed into at most `limit` bytes
//! (`max_decompressed_bytes` of the connection), read incrementally, so a small
//! payload that would expand without end (a zip bomb) stops at the limit, never
//! allocates beyond it, and is an error naming its stream sequence.

use std::cell::RefCell;
use std::io::{Read, Write};

use async_nats::HeaderMap;

use crate::error::{Error, Result};

/// The header naming the algorithm a payload is compressed with.
pub const HEADER: &str = "Content-Encoding";

/// zstd's level: 1, its fastest before the negative levels trade ratio away. On
/// JSON it packs nearly as tightly as the default 3 (the bench's 16 KiB documents:
/// about a tenth of their size either way) at about twice its speed, and a publish
/// compresses on its one sending task.
const ZSTD_LEVEL: i32 = 1;

/// How a payload is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Zstandard frames (RFC 8878), content size in the frame header.
    Zstd,
    /// gzip (RFC 1952).
    Gzip,
    /// The zlib format (RFC 1950): the NATS Spark connector's `zlib`.
    Zlib,
    /// S2 blocks (klauspost/compress/s2; a superset of Snappy's block format).
    S2,
}

named_choices!(Compression, "compression", {
    Zstd => "zstd",
    Gzip => "gzip",
    Zlib => "zlib" | "deflate",
    S2 => "s2",
});

/// What a read does with a payload marked compressed: the connection's `decompress`
/// and `max_decompressed_bytes`. (A bound per batch would fail a consumer's batch
/// whose messages were already delivered, and with `ack_policy` none lose them: the
/// bound is per payload, and a batch holds at most its pull's `max_messages`.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decompression {
    /// Payloads decompressed by their header (else handed out as stored, the header
    /// kept).
    pub enabled: bool,
    /// The most bytes one payload decompresses to.
    pub max_payload: usize,
}

impl Default for Decompression {
    fn default() -> Self {
        Self {
            enabled: true,
            max_payload: crate::defaults::MAX_DECOMPRESSED_BYTES,
        }
    }
}

/// Why a payload could not be decompressed.
#[derive(Debug)]
pub enum Failure {
    /// It decompresses to more than the limit.
    TooLarge,
    /// It is not what its header says (truncated, corrupt, another format).
    Corrupt(String),
}

thread_local! {
    // A context per thread: making one per message would cost more than compressing
    // a 1 KiB payload.
    static ZSTD_COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { RefCell::new(None) };
    static ZSTD_DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
}

impl Compression {
    /// The algorithm a header value names (any case, surrounding blanks ignored);
    /// None for a value this package does not decompress (`identity`, `br`, ...):
    /// such a payload is read as it is stored, its header kept.
    pub fn from_header(value: &str) -> Option<Self> {
        Self::parse(value.trim()).ok()
    }

    /// The algorithm `headers` mark their payload with, if one this package knows.
    pub fn of(headers: Option<&HeaderMap>) -> Option<Self> {
        let value = headers?.get(HEADER)?;
        Self::from_header(value.as_str())
    }

    /// `data` compressed.
    pub fn compress(self, data: &[u8]) -> Result<Vec<u8>> {
        let failed = |e: std::io::Error| {
            Error::bad_input(format!("compressing a payload with {}: {e}", self.as_str()))
        };
        match self {
            Self::Zstd => ZSTD_COMPRESSOR.with(|cell| {
                let mut cell = cell.borrow_mut();
                let compressor = match &mut *cell {
                    Some(c) => c,
                    None => cell.insert(zstd::bulk::Compressor::new(ZSTD_LEVEL).map_err(failed)?),
                };
                compressor.compress(data).map_err(failed)
            }),
            Self::Gzip => {
                let mut e = flate2::write::GzEncoder::new(
                    Vec::with_capacity(data.len() / 2 + 32),
                    flate2::Compression::fast(),
                );
                e.write_all(data).map_err(failed)?;
                e.finish().map_err(failed)
            }
            Self::Zlib => {
                let mut e = flate2::write::ZlibEncoder::new(
                    Vec::with_capacity(data.len() / 2 + 16),
                    flate2::Compression::fast(),
                );
                e.write_all(data).map_err(failed)?;
                e.finish().map_err(failed)
            }
            Self::S2 => Ok(minlz::encode(data)),
        }
    }

    /// `data` decompressed into at most `limit` bytes.
    pub fn decompress(self, data: &[u8], limit: usize) -> std::result::Result<Vec<u8>, Failure> {
        match self {
            Self::Zstd => {
                match zstd::zstd_safe::get_frame_content_size(data) {
                    Ok(Some(size)) if size > limit as u64 => return Err(Failure::TooLarge),
                    // One frame whose header gives its size (as every frame this
                    // package writes): decompressed in one call into that much.
                    Ok(Some(size)) if one_frame(data) => {
                        return ZSTD_DECOMPRESSOR.with(|cell| {
                            let mut cell = cell.borrow_mut();
                            let d = match &mut *cell {
                                Some(d) => d,
                                None => cell.insert(
                                    zstd::bulk::Decompressor::new()
                                        .map_err(|e| Failure::Corrupt(e.to_string()))?,
                                ),
                            };
                            d.decompress(data, size as usize)
                                .map_err(|e| Failure::Corrupt(e.to_string()))
                        });
                    }
                    Ok(_) => {}
                    Err(_) => return Err(Failure::Corrupt("not a zstd frame".into())),
                }
                let decoder = zstd::stream::read::Decoder::with_buffer(data)
                    .map_err(|e| Failure::Corrupt(e.to_string()))?;
                read_bounded(decoder, data.len(), limit)
            }
            Self::Gzip => read_bounded(flate2::read::MultiGzDecoder::new(data), data.len(), limit),
            Self::Zlib => read_bounded(flate2::read::ZlibDecoder::new(data), data.len(), limit),
            Self::S2 => {
                let (size, _) =
                    minlz::decode_len(data).map_err(|e| Failure::Corrupt(e.to_string()))?;
                if size > limit {
                    return Err(Failure::TooLarge);
                }
                minlz::decode(data).map_err(|e| Failure::Corrupt(e.to_string()))
            }
        }
    }
}

/// Whether `data` is exactly one zstd frame (a payload may hold several, as a zstd
/// stream may: those are read as a stream).
fn one_frame(data: &[u8]) -> bool {
    zstd::zstd_safe::find_frame_compressed_size(data).is_ok_and(|n| n == data.len())
}

/// Everything `reader` gives, refused past `limit` bytes; never allocates beyond it.
fn read_bounded<R: Read>(
    reader: R,
    compressed: usize,
    limit: usize,
) -> std::result::Result<Vec<u8>, Failure> {
    let mut out = Vec::with_capacity(compressed.saturating_mul(4).min(limit).max(64));
    let mut bounded = reader.take(limit as u64 + 1);
    bounded
        .read_to_end(&mut out)
        .map_err(|e| Failure::Corrupt(e.to_string()))?;
    if out.len() > limit {
        return Err(Failure::TooLarge);
    }
    Ok(out)
}

/// The error of a payload over the limit: its stream and sequence, the limit, and
/// the option that raises it.
pub fn too_large(stream: &str, seq: u64, compression: Compression, limit: usize) -> Error {
    Error::new(
        crate::error::ErrorKind::MalformedPayload,
        format!(
            "stream '{stream}' seq {seq}: the payload ({HEADER}: {}) decompresses to more than \
             max_decompressed_bytes ({limit} bytes); a connection with a larger \
             max_decompressed_bytes reads it",
            compression.as_str()
        ),
    )
}

/// The error of a payload that does not decompress as its header says.
pub fn corrupt(stream: &str, seq: u64, compression: Compression, why: &str) -> Error {
    Error::new(
        crate::error::ErrorKind::MalformedPayload,
        format!(
            "stream '{stream}' seq {seq}: the payload is marked {HEADER}: {} and does not \
             decompress: {why}",
            compression.as_str()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Compression; 4] = [
        Compression::Zstd,
        Compression::Gzip,
        Compression::Zlib,
        Compression::S2,
    ];

    fn json(n: usize) -> Vec<u8> {
        let mut s = String::from("[");
        for i in 0..n {
            s.push_str(&format!("{{\"id\":{i},\"name\":\"row {i}\",\"ok\":true}},"));
        }
        s.push(']');
        s.into_bytes()
    }

    #[test]
    fn every_algorithm_round_trips_and_shrinks_json() {
        let data = json(500);
        for c in ALL {
            let packed = c.compress(&data).unwrap();
            assert!(packed.len() * 3 < data.len(), "{c:?}: {}", packed.len());
            assert_eq!(c.decompress(&packed, data.len()).unwrap(), data, "{c:?}");
            assert_eq!(c.decompress(&c.compress(b"").unwrap(), 10).unwrap(), b"");
        }
    }

    #[test]
    fn a_payload_over_the_limit_is_refused_without_allocating_it() {
        // 16 MiB of zeros packs into a few KiB: a reader with a 1 MiB limit stops.
        let zeros = vec![0u8; 16 << 20];
        for c in ALL {
            let packed = c.compress(&zeros).unwrap();
            assert!(packed.len() < 4 << 20, "{c:?}");
            assert!(
                matches!(c.decompress(&packed, 1 << 20), Err(Failure::TooLarge)),
                "{c:?}"
            );
            assert!(c.decompress(&packed, zeros.len()).is_ok(), "{c:?}");
        }
    }

    #[test]
    fn a_zstd_frame_without_its_size_is_read_as_a_stream_and_bounded() {
        let data = json(200);
        let mut e = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        e.include_contentsize(false).unwrap();
        e.write_all(&data).unwrap();
        let packed = e.finish().unwrap();
        assert_eq!(
            zstd::zstd_safe::get_frame_content_size(&packed).unwrap(),
            None
        );
        let c = Compression::Zstd;
        assert_eq!(c.decompress(&packed, data.len()).unwrap(), data);
        assert!(matches!(
            c.decompress(&packed, data.len() - 1),
            Err(Failure::TooLarge)
        ));
    }

    #[test]
    fn corrupt_payloads_are_told() {
        let data = json(50);
        for c in ALL {
            let packed = c.compress(&data).unwrap();
            let cut = &packed[..packed.len() / 2];
            assert!(
                matches!(c.decompress(cut, 1 << 20), Err(Failure::Corrupt(_))),
                "{c:?}"
            );
            assert!(
                matches!(
                    c.decompress(b"{\"plain\": true}", 1 << 20),
                    Err(Failure::Corrupt(_))
                ),
                "{c:?}"
            );
        }
    }

    #[test]
    fn header_values_are_read_in_any_case() {
        assert_eq!(Compression::from_header(" ZSTD "), Some(Compression::Zstd));
        assert_eq!(Compression::from_header("deflate"), Some(Compression::Zlib));
        assert_eq!(Compression::from_header("identity"), None);
        assert_eq!(Compression::from_header("br"), None);
        let mut h = HeaderMap::new();
        h.insert(HEADER, "gzip");
        assert_eq!(Compression::of(Some(&h)), Some(Compression::Gzip));
        assert_eq!(Compression::of(None), None);
    }
}
