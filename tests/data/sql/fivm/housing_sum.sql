-- A SUM over F-IVM's Housing join with a group-by (standard SQL over the same schema).
-- (F-IVM derives the variable order: the imported one has the group-by variable below bound ones).


INCLUDE 'schema.sql';

SELECT house, SUM(price * averagesalary) AS total, COUNT(*) AS n
FROM HOUSE NATURAL JOIN SHOP NATURAL JOIN INSTITUTION NATURAL JOIN RESTAURANT NATURAL JOIN DEMOGRAPHICS
     NATURAL JOIN TRANSPORT
GROUP BY house;
