srun --nodes=3 --ntasks-per-node=1 --kill-on-bad-exit=0 \
  bash -c 'exec npx tensorlane node --config "$PWD/lab/cluster.json" --name "$(hostname -s)"'
