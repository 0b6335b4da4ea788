// Which agent, conversation or project a workload picks next.

package sim

import mrand "math/rand/v2"

// pick returns an agent for a hook: a hot one with the scenario's hot
// share, else any.
func (s *Sim) pick() int32 {
	s.mu.Lock()
	agents, hot, share := s.sc.Agents, s.sc.Hot, s.sc.HotShare
	s.mu.Unlock()
	if hot > 0 && randFloat() < share {
		return int32(randN(hot)) + 1
	}
	return int32(randN(agents)) + 1
}

// pickAny returns any agent.
func (s *Sim) pickAny() int32 {
	s.mu.Lock()
	agents := s.sc.Agents
	s.mu.Unlock()
	return int32(randN(agents)) + 1
}

// batch returns n agents for a background cycle: the hot ones (which a
// background worker meets most often held) and random others.
func (s *Sim) batch(n int) []int32 {
	s.mu.Lock()
	agents, hot := s.sc.Agents, s.sc.Hot
	s.mu.Unlock()
	n = min(n, agents)
	seen := make(map[int32]bool, n)
	out := make([]int32, 0, n)
	for a := int32(1); a <= int32(hot) && len(out) < n; a++ {
		seen[a] = true
		out = append(out, a)
	}
	for len(out) < n {
		a := int32(randN(agents)) + 1
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}

// pickConv returns a conversation for a message: a hot one with the
// scenario's share, else any.
func (s *Sim) pickConv() int32 {
	s.mu.Lock()
	n, hot, share := s.sc.Conversations, s.sc.HotConversations, s.sc.HotConvShare
	s.mu.Unlock()
	if hot > 0 && randFloat() < share {
		return int32(randN(hot)) + 1
	}
	return int32(randN(n)) + 1
}

// floodShare is the share of jobs that go to the flooding project; evenShare
// spreads work evenly over the projects.
func (s *Sim) floodShare() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sc.FloodShare
}

func (s *Sim) evenShare() float64 { return 1 / float64(len(s.jobs.Projects())) }

func randN(n int) int { return mrand.IntN(n) }

func randFloat() float64 { return mrand.Float64() }
