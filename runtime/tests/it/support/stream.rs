//! The streaming API as a test client opens it: one WebSocket per call, the token handed over
//! as a client chooses.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How a test client hands over its token.
pub enum Token<'a> {
    None,
    Header(&'a str),
    Query(&'a str),
    Protocol(&'a str),
}

/// Opens `/api/v1/streaming?<query>` on `base` (`http://host:port`); the handshake's answer
/// or its refusal.
pub async fn open(
    base: &str,
    query: &str,
    token: Token<'_>,
) -> Result<(Socket, tungstenite::handshake::client::Response), tungstenite::Error> {
    let ws = base.replacen("http://", "ws://", 1);
    let mut url = format!("{ws}/api/v1/streaming?{query}");
    if let Token::Query(t) = token {
        url.push_str(&format!("&access_token={t}"));
    }
    let mut req = url.into_client_request()?;
    match token {
        Token::Header(t) => {
            req.headers_mut()
                .insert("authorization", format!("Bearer {t}").parse().unwrap());
        }
        Token::Protocol(t) => {
            req.headers_mut()
                .insert("sec-websocket-protocol", t.parse().unwrap());
        }
        Token::None | Token::Query(_) => {}
    }
    tokio_tungstenite::connect_async(req).await
}

/// Opens `/api/v1/streaming?<query>` with the token in the header.
pub async fn connect(base: &str, query: &str, token: &str) -> Socket {
    open(base, query, Token::Header(token))
        .await
        .expect("WebSocket handshake")
        .0
}

/// As `connect`, then waits until the stream listens: the stream subscribes to events once
/// upgraded, after the handshake answered, so a command answered (an unknown stream's
/// error) shows it is listening before the test acts.
pub async fn listening(base: &str, query: &str, token: &str, wait: Duration) -> Socket {
    let mut ws = connect(base, query, token).await;
    ws.send(Message::Text(
        serde_json::json!({ "type": "subscribe", "stream": "nonsense" })
            .to_string()
            .into(),
    ))
    .await
    .unwrap();
    let m = tokio::time::timeout(wait, ws.next())
        .await
        .expect("an answer in time");
    let Some(Ok(Message::Text(text))) = m else {
        panic!("stream ended: {m:?}")
    };
    assert!(text.as_str().contains("error"), "{text}");
    ws
}
