//! The server side of RFC 6455 as the streaming subresources need it: the handshake's accept
//! key and subprotocols, the client's (masked) frames read from the request's payload and
//! joined into messages, and the server's (unmasked) frames.

use actix_web::http::header::HeaderMap;
use bytes::{Buf, Bytes, BytesMut};
use futures::{Stream, StreamExt};

const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

pub const BINARY: u8 = 0x2;
pub const CLOSE: u8 = 0x8;
const PING: u8 = 0x9;
pub const PONG: u8 = 0xA;

/// Whether `headers` ask for a WebSocket upgrade (`Upgrade: websocket` and `Connection`
/// naming `upgrade`), as `wsstream.IsWebSocketRequest` decides.
pub fn is_websocket(headers: &HeaderMap) -> bool {
    let upgrade = headers
        .get("upgrade")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim().eq_ignore_ascii_case("websocket"));
    upgrade && is_upgrade(headers)
}

/// Whether `Connection` names `upgrade` (`httpstream.IsUpgradeRequest`).
pub fn is_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get_all("connection")
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("upgrade"))
}

/// The subprotocols the client offers, in its order.
pub fn protocols(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all("sec-websocket-protocol")
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|protocol| protocol.trim().to_owned())
        .filter(|protocol| !protocol.is_empty())
        .collect()
}

/// `Sec-WebSocket-Accept` for the client's `Sec-WebSocket-Key`.
pub fn accept_key(key: &str) -> String {
    use base64::Engine;
    let digest = ring::digest::digest(
        &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        format!("{}{GUID}", key.trim()).as_bytes(),
    );
    base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
}

/// One server frame (FIN set, no mask).
pub fn frame(opcode: u8, payload: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(payload.len() + 10);
    out.extend_from_slice(&[0x80 | opcode]);
    match payload.len() {
        len @ 0..=125 => out.extend_from_slice(&[len as u8]),
        len @ 126..=0xFFFF => {
            out.extend_from_slice(&[126]);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        len => {
            out.extend_from_slice(&[127]);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
    out.freeze()
}

/// A message from the client.
#[derive(Debug, PartialEq, Eq)]
pub enum Message {
    Binary(Vec<u8>),
    /// A ping, to be answered with a pong of the same data.
    Ping(Vec<u8>),
    /// A close frame, or the connection's end.
    Close,
}

/// The client's messages, read from the bytes after the upgrade.
pub struct Reader<S> {
    input: S,
    buffer: BytesMut,
    /// A fragmented message's frames so far (a control frame may come between them).
    partial: Vec<u8>,
}

impl<S, E> Reader<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    pub fn new(input: S) -> Self {
        Self {
            input,
            buffer: BytesMut::new(),
            partial: Vec::new(),
        }
    }

    /// The next whole message; text messages are read as binary ones.
    pub async fn next(&mut self) -> Message {
        loop {
            let Some((fin, opcode, payload)) = self.frame().await else {
                return Message::Close;
            };
            match opcode {
                PING => return Message::Ping(payload),
                PONG => {}
                CLOSE => return Message::Close,
                _ => {
                    self.partial.extend_from_slice(&payload);
                    if fin {
                        return Message::Binary(std::mem::take(&mut self.partial));
                    }
                }
            }
        }
    }

    /// The next frame: FIN, opcode and unmasked payload; `None` at the end of the input.
    async fn frame(&mut self) -> Option<(bool, u8, Vec<u8>)> {
        loop {
            if let Some(frame) = parse(&mut self.buffer) {
                return Some(frame);
            }
            match self.input.next().await {
                Some(Ok(chunk)) => self.buffer.extend_from_slice(&chunk),
                _ => return None,
            }
        }
    }
}

/// A whole frame off the front of `buffer`, if it holds one.
fn parse(buffer: &mut BytesMut) -> Option<(bool, u8, Vec<u8>)> {
    if buffer.len() < 2 {
        return None;
    }
    let (first, second) = (buffer[0], buffer[1]);
    let masked = second & 0x80 != 0;
    let (len, mut offset) = match second & 0x7F {
        126 => (
            u64::from(u16::from_be_bytes(buffer.get(2..4)?.try_into().ok()?)),
            4,
        ),
        127 => (u64::from_be_bytes(buffer.get(2..10)?.try_into().ok()?), 10),
        len => (u64::from(len), 2),
    };
    let mask: Option<[u8; 4]> = if masked {
        let mask = buffer.get(offset..offset + 4)?.try_into().ok()?;
        offset += 4;
        Some(mask)
    } else {
        None
    };
    let len = usize::try_from(len).ok()?;
    if buffer.len() < offset + len {
        return None;
    }
    buffer.advance(offset);
    let mut payload = buffer.split_to(len).to_vec();
    if let Some(mask) = mask {
        for (index, byte) in payload.iter_mut().enumerate() {
            *byte ^= mask[index % 4];
        }
    }
    Some((first & 0x80 != 0, first & 0x0F, payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONTINUATION: u8 = 0x0;

    #[test]
    fn the_accept_key_is_the_rfcs() {
        // RFC 6455 section 1.3's example.
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[actix_web::test]
    async fn masked_and_fragmented_frames_are_joined_into_messages() {
        let mask = [1u8, 2, 3, 4];
        let masked = |opcode: u8, fin: bool, payload: &[u8]| {
            let mut out = vec![
                if fin { 0x80 } else { 0 } | opcode,
                0x80 | payload.len() as u8,
            ];
            out.extend_from_slice(&mask);
            out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
            out
        };
        let mut wire = masked(BINARY, false, b"\x00he");
        wire.extend(masked(PING, true, b"p"));
        wire.extend(masked(CONTINUATION, true, b"llo"));
        wire.extend(masked(CLOSE, true, b""));
        // Split anywhere: the reader waits for whole frames.
        let chunks: Vec<Result<Bytes, ()>> = wire
            .chunks(3)
            .map(|chunk| Ok(Bytes::copy_from_slice(chunk)))
            .collect();
        let mut reader = Reader::new(futures::stream::iter(chunks));
        assert_eq!(reader.next().await, Message::Ping(b"p".to_vec()));
        assert_eq!(reader.next().await, Message::Binary(b"\x00hello".to_vec()));
        assert_eq!(reader.next().await, Message::Close);
        assert_eq!(reader.next().await, Message::Close);
    }

    #[test]
    fn server_frames_carry_their_length_in_the_shortest_form() {
        assert_eq!(&frame(BINARY, b"ab")[..], &[0x82, 2, b'a', b'b']);
        let long = vec![7u8; 300];
        let framed = frame(BINARY, &long);
        assert_eq!(&framed[..4], &[0x82, 126, 1, 44]);
        assert_eq!(framed.len(), 304);
    }
}
