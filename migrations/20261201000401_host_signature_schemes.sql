-- Which HTTP signature scheme a remote host accepts (issue 17/4): 'rfc9421' once it signed to
-- us with RFC 9421 or accepted our RFC 9421 delivery, 'cavage' once it refused RFC 9421 (400
-- or 401) and took draft-cavage. Hosts without a row get draft-cavage, which every server reads.
CREATE TABLE host_signature_schemes (
    host        text        PRIMARY KEY,   -- host[:port] as in the inbox URL
    scheme      text        NOT NULL CHECK (scheme IN ('rfc9421', 'cavage')),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
