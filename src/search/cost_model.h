// A model of a schedule's time from its knobs, fitted online on what the screens measured:
// log(time) = bias + the sum over knobs of one weight per (knob, value), by ridge-regularised
// least squares. The search ranks untried schedules of the family's space with it; the GPU
// decides. Values never observed weigh nothing, so an unexplored value ranks as the mean.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "codegen/codegen.h"

namespace ksol::search {

class CostModel {
 public:
  void observe(const codegen::Schedule& s, double log_time);
  size_t observations() const { return y_.size(); }
  // Refits on every observation (a few hundred at most: a small dense solve).
  void fit(double lambda = 0.5);
  // The predicted log time (the mean of the observations before any fit).
  double predict(const codegen::Schedule& s) const;

 private:
  std::vector<int> features(const codegen::Schedule& s, bool grow);
  std::map<std::string, int> index_;     // "key=value" -> feature
  std::vector<std::vector<int>> rows_;   // the features of each observation
  std::vector<double> y_;
  std::vector<double> w_;
  double bias_ = 0;
};

}  // namespace ksol::search
