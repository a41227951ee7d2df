-- uwf's store on PostgreSQL, schema version 2: per-workflow limits shared by every runner
-- (`uwf limits set`), the MessagePack record of src/store/records.rs.

CREATE TABLE uwf_limits (
    name text PRIMARY KEY,
    rec bytea NOT NULL
);
