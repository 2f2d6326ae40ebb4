-- Directed 3-cycles of one edge stream with deletions (DBToaster dialect).
CREATE STREAM edges (src INT, dst INT)
  FROM FILE 'edges.csv' LINE DELIMITED CSV (delimiter := '|', deletions := 'true');

CREATE VIEW triangle_count AS
SELECT COUNT(*) AS triangles
FROM edges e1, edges e2, edges e3
WHERE e1.dst = e2.src AND e2.dst = e3.src AND e3.dst = e1.src;
