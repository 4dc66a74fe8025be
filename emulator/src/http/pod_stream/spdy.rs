//! The client side of SPDY/3.1 as kube-apiserver's stream translator speaks it to a kubelet
//! (moby/spdystream's framing): streams opened with SYN_STREAM, data in DATA frames, FIN to
//! half-close, PINGs answered. The peer's header blocks are never needed and never inflated;
//! ours are a zlib stream of stored blocks, each followed by the sync-flush marker, which
//! spdystream's reader (a zlib reader with SPDY's dictionary) reads as any other.

use bytes::{Buf, BufMut, Bytes, BytesMut};

const VERSION: u16 = 3;
const SYN_STREAM: u16 = 1;
const RST_STREAM: u16 = 3;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const FLAG_FIN: u8 = 0x01;
/// The largest DATA payload written at once (spdystream writes what it is given; the limit
/// keeps one frame from holding the connection long).
pub const MAX_DATA: usize = 32 * 1024;

/// Our side's header compressor: the zlib header once, then each block stored.
#[derive(Default)]
pub struct Headers {
    started: bool,
}

impl Headers {
    /// The compressed block for `pairs` (names lower-case, as SPDY requires).
    fn block(&mut self, pairs: &[(&str, &str)]) -> Vec<u8> {
        let mut plain = Vec::new();
        plain.put_u32(pairs.len() as u32);
        for (name, value) in pairs {
            plain.put_u32(name.len() as u32);
            plain.extend_from_slice(name.as_bytes());
            plain.put_u32(value.len() as u32);
            plain.extend_from_slice(value.as_bytes());
        }
        let mut out = Vec::with_capacity(plain.len() + 12);
        if !self.started {
            // CMF 0x78 (deflate, 32K window), FLG 0x01: no preset dictionary is needed to
            // read stored blocks; the reader keeps SPDY's as history all the same.
            out.extend_from_slice(&[0x78, 0x01]);
            self.started = true;
        }
        // A non-final stored block: header bits 000, padded to the byte, LEN, NLEN.
        let len = plain.len() as u16;
        out.push(0);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(&plain);
        // Then an empty stored block, the sync-flush marker: Go's inflater hands out what a
        // stored block held only when the next block is an empty one (or the last).
        out.extend_from_slice(&[0, 0, 0, 0xFF, 0xFF]);
        out
    }
}

fn control(kind: u16, flags: u8, payload: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(payload.len() + 8);
    out.put_u16(0x8000 | VERSION);
    out.put_u16(kind);
    out.put_u32(u32::from(flags) << 24 | payload.len() as u32);
    out.extend_from_slice(payload);
    out.freeze()
}

/// SYN_STREAM opening stream `id` with `headers`.
pub fn syn_stream(compressor: &mut Headers, id: u32, headers: &[(&str, &str)]) -> Bytes {
    let mut payload = Vec::new();
    payload.put_u32(id & 0x7FFF_FFFF);
    payload.put_u32(0); // associated-to-stream-id
    payload.put_u8(0); // priority << 5
    payload.put_u8(0); // slot
    payload.extend_from_slice(&compressor.block(headers));
    control(SYN_STREAM, 0, &payload)
}

/// A DATA frame on stream `id`; `fin` half-closes our side.
pub fn data(id: u32, payload: &[u8], fin: bool) -> Bytes {
    let mut out = BytesMut::with_capacity(payload.len() + 8);
    out.put_u32(id & 0x7FFF_FFFF);
    out.put_u32(u32::from(if fin { FLAG_FIN } else { 0 }) << 24 | payload.len() as u32);
    out.extend_from_slice(payload);
    out.freeze()
}

/// A frame read from the peer, as far as a client of it cares.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    Data {
        stream: u32,
        fin: bool,
        data: Bytes,
    },
    /// The stream was reset: nothing more comes on it.
    Reset {
        stream: u32,
    },
    /// A ping to echo: the frame to send back.
    Ping(Bytes),
    GoAway,
    /// SYN_REPLY, HEADERS, SETTINGS, WINDOW_UPDATE and the like; their FIN is kept, as
    /// a SYN_REPLY or HEADERS may close a stream.
    Other {
        stream: Option<u32>,
        fin: bool,
    },
}

/// A whole frame off the front of `buffer`, if it holds one.
pub fn parse(buffer: &mut BytesMut) -> Option<Frame> {
    if buffer.len() < 8 {
        return None;
    }
    let flags = buffer[4];
    let len = (u32::from_be_bytes([0, buffer[5], buffer[6], buffer[7]])) as usize;
    if buffer.len() < 8 + len {
        return None;
    }
    let head = buffer.split_to(8);
    let payload = buffer.split_to(len).freeze();
    if head[0] & 0x80 == 0 {
        let stream = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) & 0x7FFF_FFFF;
        return Some(Frame::Data {
            stream,
            fin: flags & FLAG_FIN != 0,
            data: payload,
        });
    }
    let kind = u16::from_be_bytes([head[2], head[3]]);
    let stream = (payload.len() >= 4).then(|| payload.clone().get_u32() & 0x7FFF_FFFF);
    Some(match kind {
        RST_STREAM => Frame::Reset {
            stream: stream.unwrap_or(0),
        },
        PING => Frame::Ping(control(PING, 0, &payload)),
        GOAWAY => Frame::GoAway,
        _ => {
            // SYN_STREAM, SYN_REPLY and HEADERS carry a stream; SETTINGS does not.
            let carries_stream = matches!(kind, 1 | 2 | 8 | 9);
            Frame::Other {
                stream: stream.filter(|_| carries_stream),
                fin: flags & FLAG_FIN != 0 && carries_stream,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn header_blocks_inflate_as_one_zlib_stream() {
        let mut compressor = Headers::default();
        let first = syn_stream(&mut compressor, 1, &[("streamtype", "error")]);
        let second = syn_stream(&mut compressor, 3, &[("streamtype", "stdout")]);
        assert_eq!(&first[..4], &[0x80, 3, 0, 1]);
        let mut stream = first[18..].to_vec();
        stream.extend_from_slice(&second[18..]);
        // A zlib reader over the concatenation yields both blocks (it stops at the end of
        // the input, the stream being never finished).
        let mut plain = Vec::new();
        let _ = flate2::read::ZlibDecoder::new(&stream[..]).read_to_end(&mut plain);
        let mut expected = Vec::new();
        for value in ["error", "stdout"] {
            expected.put_u32(1);
            expected.put_u32(10);
            expected.extend_from_slice(b"streamtype");
            expected.put_u32(value.len() as u32);
            expected.extend_from_slice(value.as_bytes());
        }
        assert_eq!(plain, expected);
    }

    #[test]
    fn frames_are_parsed_whole_and_pings_echoed() {
        let mut buffer = BytesMut::new();
        buffer.extend_from_slice(&data(5, b"hi", true));
        buffer.extend_from_slice(&control(PING, 0, &7u32.to_be_bytes()));
        buffer.extend_from_slice(&control(RST_STREAM, 0, &[0, 0, 0, 3, 0, 0, 0, 5]));
        buffer.extend_from_slice(&data(1, b"partial", false)[..5]);
        assert_eq!(
            parse(&mut buffer),
            Some(Frame::Data {
                stream: 5,
                fin: true,
                data: Bytes::from_static(b"hi")
            })
        );
        assert_eq!(
            parse(&mut buffer),
            Some(Frame::Ping(control(PING, 0, &7u32.to_be_bytes())))
        );
        assert_eq!(parse(&mut buffer), Some(Frame::Reset { stream: 3 }));
        assert_eq!(parse(&mut buffer), None);
    }
}
