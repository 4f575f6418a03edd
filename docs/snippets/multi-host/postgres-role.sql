CREATE ROLE tensorlane LOGIN PASSWORD '<contents of postgres/password>';  -- password_encryption = scram-sha-256
CREATE DATABASE tensorlane OWNER tensorlane;
REVOKE ALL ON DATABASE postgres FROM PUBLIC;
