-- F-IVM's housing regression (FIVM examples/queries/housing/housing_regression.sql; public):
-- the cofactor matrix of every non-join variable over the natural join, in F-IVM's dialect.
IMPORT DTREE FROM FILE 'housing.txt';

CREATE TYPE RingCofactor FROM FILE 'ring/ring_cofactor_degree2.hpp';

INCLUDE 'schema.sql';

SELECT SUM(
    [lift<0>: RingCofactor<double,0,1>](livingarea) *
    [lift<1>: RingCofactor<double,1,1>](price) *
    [lift<2>: RingCofactor<double,2,1>](nbbedrooms) *
    [lift<3>: RingCofactor<double,3,1>](nbbathrooms) *
    [lift<4>: RingCofactor<double,4,1>](kitchensize) *
    [lift<5>: RingCofactor<double,5,1>](house) *
    [lift<6>: RingCofactor<double,6,1>](flat) *
    [lift<7>: RingCofactor<double,7,1>](unknown) *
    [lift<8>: RingCofactor<double,8,1>](garden) *
    [lift<9>: RingCofactor<double,9,1>](parking) *
    [lift<10>: RingCofactor<double,10,1>](openinghoursshop) *
    [lift<11>: RingCofactor<double,11,1>](pricerangeshop) *
    [lift<12>: RingCofactor<double,12,1>](sainsburys) *
    [lift<13>: RingCofactor<double,13,1>](tesco) *
    [lift<14>: RingCofactor<double,14,1>](ms) *
    [lift<15>: RingCofactor<double,15,1>](typeeducation) *
    [lift<16>: RingCofactor<double,16,1>](sizeinstitution) *
    [lift<17>: RingCofactor<double,17,1>](openinghoursrest) *
    [lift<18>: RingCofactor<double,18,1>](pricerangerest) *
    [lift<19>: RingCofactor<double,19,1>](averagesalary) *
    [lift<20>: RingCofactor<double,20,1>](crimesperyear) *
    [lift<21>: RingCofactor<double,21,1>](unemployment) *
    [lift<22>: RingCofactor<double,22,1>](nbhospitals) *
    [lift<23>: RingCofactor<double,23,1>](nbbuslines) *
    [lift<24>: RingCofactor<double,24,1>](nbtrainstations) *
    [lift<25>: RingCofactor<double,25,1>](distancecitycentre)
)
FROM HOUSE NATURAL JOIN SHOP NATURAL JOIN INSTITUTION NATURAL JOIN RESTAURANT NATURAL JOIN DEMOGRAPHICS
     NATURAL JOIN TRANSPORT;
