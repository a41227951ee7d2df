-- uwf's store on PostgreSQL, schema version 7: steps and failed steps per UTC minute (minutes
-- since 1970-01-01, by the stepping process's clock) and workflow name, which the runner's
-- dashboard (`uwf serve`'s /runs, `uwf ps --stats`) reads. A transaction adds to each of its
-- rows once, in key order, with its COMMIT; rows older than 48 hours are deleted by the
-- writers (src/store/minutes.rs).

CREATE TABLE uwf_step_minutes (
    minute integer NOT NULL,
    name text NOT NULL,
    steps bigint NOT NULL,
    failures bigint NOT NULL,
    PRIMARY KEY (minute, name)
);
