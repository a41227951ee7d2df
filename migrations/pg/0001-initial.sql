-- uwf's store on PostgreSQL, schema version 1.
--
-- A node id is the 64-bit XXH64 value with its top bit flipped, stored as bigint, so that
-- bigint order is id order (prefix look-ups are ranges). The thread-layer records (threads,
-- registry versions, history, leases, thread states, removals) keep the MessagePack encodings
-- of the redb store (src/store/records.rs), so both backends hold the same bytes.

CREATE TABLE uwf_meta (
    key text PRIMARY KEY,
    value bigint NOT NULL
);

CREATE SEQUENCE uwf_node_seq;

-- One row a node: its canonical payload CBOR, type, first-write time and BLAKE3 digest.
CREATE TABLE uwf_nodes (
    id bigint PRIMARY KEY,
    seq bigint NOT NULL DEFAULT nextval('uwf_node_seq'),
    type bigint NOT NULL,
    ts bigint NOT NULL,
    digest bytea NOT NULL,
    payload bytea NOT NULL
);
CREATE UNIQUE INDEX uwf_nodes_seq ON uwf_nodes (seq);
CREATE INDEX uwf_nodes_type ON uwf_nodes (type, seq);

-- The references of each node, in schema order (derived from the payload at put time), so
-- that a walk is one recursive query inside the server.
CREATE TABLE uwf_edges (
    src bigint NOT NULL,
    pos integer NOT NULL,
    dst bigint NOT NULL,
    PRIMARY KEY (src, pos)
);

CREATE TABLE uwf_threads (
    id text PRIMARY KEY,
    rec bytea NOT NULL
);

CREATE TABLE uwf_registry (
    name text PRIMARY KEY,
    workflow bigint NOT NULL
);

CREATE TABLE uwf_registry_history (
    seq bigserial PRIMARY KEY,
    name text NOT NULL,
    rec bytea NOT NULL
);
CREATE INDEX uwf_registry_history_name ON uwf_registry_history (name, seq);

CREATE TABLE uwf_history (
    seq bigserial PRIMARY KEY,
    thread text NOT NULL,
    rec bytea NOT NULL
);
CREATE INDEX uwf_history_thread ON uwf_history (thread, seq);

-- The process running a step of a thread. `expires_at` is renewed while the step runs; a
-- lease whose holder stopped renewing it is dead once it passes, whichever machine held it.
CREATE TABLE uwf_leases (
    thread text PRIMARY KEY,
    rec bytea NOT NULL,
    holder text NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX uwf_leases_holder ON uwf_leases (holder);

CREATE TABLE uwf_thread_state (
    thread text PRIMARY KEY,
    rec bytea NOT NULL
);

CREATE TABLE uwf_removals (
    seq bigserial PRIMARY KEY,
    rec bytea NOT NULL
);
