module hollo.invalid/bench/streaming-client

go 1.23

require github.com/gorilla/websocket v1.5.3
