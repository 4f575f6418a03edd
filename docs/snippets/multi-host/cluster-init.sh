npx tensorlane cluster init --name lab \
  --hosts h1=10.0.0.11@eth0,h2=10.0.0.12@eth0,h3=10.0.0.13@ens5 \
  --drivers driver --postgres 10.0.0.5:5432 --out lab/
