-- uwf's store on PostgreSQL, schema version 6: model usage. A step's calls (the MessagePack
-- record of src/store/records.rs) and the aggregate `uwf usage` and the budgets read: one row
-- per thread, UTC day (days since 1970-01-01, by the server's clock), role and model, added to
-- by the write that records a step's calls.

CREATE TABLE uwf_usage_calls (
    step bigint PRIMARY KEY,
    rec bytea NOT NULL
);

CREATE TABLE uwf_usage (
    thread text NOT NULL,
    day integer NOT NULL,
    role text NOT NULL,
    model text NOT NULL,
    workflow bigint,
    calls bigint NOT NULL,
    input_tokens bigint NOT NULL,
    output_tokens bigint NOT NULL,
    cached_input_tokens bigint NOT NULL,
    cost_usd double precision NOT NULL,
    costed_calls bigint NOT NULL,
    PRIMARY KEY (thread, day, role, model)
);

-- A workflow's day (by its name), for its day budget; added to once per group commit.
CREATE TABLE uwf_usage_days (
    name text NOT NULL,
    day integer NOT NULL,
    calls bigint NOT NULL,
    input_tokens bigint NOT NULL,
    output_tokens bigint NOT NULL,
    cached_input_tokens bigint NOT NULL,
    cost_usd double precision NOT NULL,
    costed_calls bigint NOT NULL,
    PRIMARY KEY (name, day)
);

-- Budgets by workflow name (`*` for the store's defaults): the MessagePack record of
-- src/store/records.rs.
CREATE TABLE uwf_budgets (
    name text PRIMARY KEY,
    rec bytea NOT NULL
);
