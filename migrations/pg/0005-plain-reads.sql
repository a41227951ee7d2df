-- uwf's store on PostgreSQL, schema version 5: a thread's chain and the check a head move makes
-- are sent as plain statements (prepared by the client, their look-ups written so that no plan
-- but index probes is possible), no longer as SQL functions, which the server plans again at
-- every call.

DROP FUNCTION uwf_chain(bigint, bigint, integer);
DROP FUNCTION uwf_first_missing(bigint, bigint[], bigint[]);
