-- A uniform sample of a join's rows (the sampling clause; RSJoin samples the join of the relations as sets).
CREATE STREAM r (a INT, b INT) FROM FILE 'r.csv' LINE DELIMITED CSV (delimiter := ',');
CREATE STREAM s (b INT, c INT) FROM FILE 's.csv' LINE DELIMITED CSV (delimiter := ',');

CREATE VIEW pairs AS
SELECT r.a, r.b, s.c FROM r, s WHERE r.b = s.b AND r.a <> s.c AND r.a < 8
USING SAMPLE reservoir(1000000 ROWS);
